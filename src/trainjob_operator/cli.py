"""`trainjob-operator`: render and validate TrainJobs offline, exactly as the operator would.

Exit codes: 0 success; 1 invalid input (field errors on stderr as `<field path>: <message>`);
2 unusable input (unreadable file, bad YAML, unknown kind, older API shape, missing runtime, a bad flag) with one
line naming it. `convert` rewrites older shapes (proposal-era `kubeflow.org/v2alpha1`, early v1alpha1) into the
served one.
Every file may hold TrainJobs and runtimes together (`-f` and `-r` accept every kind, as `kubectl apply -f`
does); as with kubectl, `-f`/`-r` name files, directories (their .json, .yaml and .yml files; `-R` their
subdirectories too) or `-` (stdin). A TrainJob whose runtime is missing or cannot be built is reported and the
others are still checked and rendered; the exit code is the worst seen (2 over 1 over 0). Fields the CRD schema
does not know make the object invalid, in the API server's words for kubectl's default `--validate=strict`;
`--validate=warn` prunes them as the API server does with a `Warning: unknown field` line each, `ignore` silently.
"""

import argparse
import contextlib
import gc
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from importlib import resources
from typing import Any, Final, NoReturn, TextIO

from . import flags, forked, jsontext
from .api import constants as c
from .api.legacy import (
    SHIPPED_RUNTIMES,
    RuntimeChoice,
    choose_runtime,
    convert,
    initializer_hint,
    initializers_of,
    legacy_shape,
    with_runtime,
)
from .api.runtime import ClusterTrainingRuntime, TrainingRuntime
from .api.trainjob import TrainJob
from .controller.keys import FRESH_KEYS
from .runtime import yamldump, yamltext
from .runtime.errors import BuildError, FieldError, describe, invalid, plain, printable, render_value
from .runtime.info import RuntimeInfo, RuntimeSource, new_runtime_info
from .runtime.lifecycle import effective_run_policy
from .runtime.observed import Observed
from .runtime.pipeline import Framework
from .runtime.prune import Schema, prune, strict_decoding_error, unknown_field_warning
from .runtime.snapshot import build_snapshot
from .runtime.validation import admit_runtime, admit_trainjob, check_runtime, check_trainjob, parse

PROG = "trainjob-operator"
STDIN = "-"
"""The file name that stands for the standard input, as in kubectl's `-f -`."""
FILE_EXTENSIONS = (".json", ".yaml", ".yml")
"""The files of a directory that `-f DIR` reads (kubectl's list); a file named on its own is read whatever its name."""
FIELD_VALIDATION = ("strict", "warn", "ignore")
"""kubectl's `--validate` values: what an unknown field does (an error, a warning, nothing); true/false are strict/ignore."""

RENDERING: Final = Observed(keys=FRESH_KEYS)
"""What `render` builds against: nothing exists yet, and new key Secrets get fresh keys."""


class UsageError(Exception):
    """Input the CLI cannot work with at all (exit 2)."""


@dataclass
class Document:
    source: str
    raw: dict[str, Any]

    @property
    def label(self) -> str:
        meta = self.raw.get("metadata") or {}
        name = meta.get("name", "<unnamed>") if isinstance(meta, dict) else "<unnamed>"
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        ref = f"{namespace}/{name}" if namespace else str(name)
        return f"{self.raw.get('kind')} {ref} ({self.source})"


def shown(path: str) -> str:
    """How a file is named in messages: stdin as kubectl names it."""
    return "STDIN" if path == STDIN else path


_stdin_text: list[str] = []
"""The standard input once read (it can be read only once; the workers' path and the one-process path both read
their files): emptied by `main` for each command."""


def read_text(path: str) -> str:
    try:
        if path == STDIN:
            if not _stdin_text:
                _stdin_text.append(sys.stdin.buffer.read().decode("utf-8"))
            return _stdin_text[0]
        with open(path, "rb") as stream:
            return stream.read().decode("utf-8")
    except OSError as err:
        raise UsageError(f"cannot read {shown(path)}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise UsageError(f"{shown(path)}: not UTF-8 text (byte {err.start})") from err


def expand_paths(paths: Sequence[str], recursive: bool) -> list[str]:
    """The files that kubectl's `-f` reads for `paths`: a file as named, `-` (stdin, at most once), a directory's
    .json/.yaml/.yml files in lexical order (and those of its subdirectories with `recursive`, as `-R`)."""
    files: list[str] = []
    for path in paths:
        if path == STDIN or not os.path.isdir(path):
            files.append(path)
            continue
        found = list(_directory_files(path, recursive))
        if not found:
            deeper = "" if recursive else " (-R reads its subdirectories too)"
            raise UsageError(f"{path}: no {', '.join(FILE_EXTENSIONS)} file in the directory{deeper}")
        files += found
    if files.count(STDIN) > 1:
        raise UsageError("- (stdin) is given more than once; it can be read only once")
    return files


def _directory_files(directory: str, recursive: bool) -> Iterator[str]:
    try:
        entries = sorted(os.listdir(directory))
    except OSError as err:
        raise UsageError(f"cannot read {directory}: {err.strerror or err}") from err
    for entry in entries:
        path = os.path.join(directory, entry)
        if os.path.isdir(path):
            if recursive:
                yield from _directory_files(path, recursive)
        elif entry.endswith(FILE_EXTENSIONS):
            yield path


def load_documents(path: str) -> Iterator[Document]:
    """Every object of a YAML stream; `kind: List` objects are flattened."""
    text = read_text(path)
    try:
        docs = yamltext.load_all(text)
    except yamltext.YamlError as err:
        raise UsageError(f"{shown(path)}: {err}") from err
    return documents(path, docs)


def documents(path: str, docs: Iterable[Any], before: int = 0) -> Iterator[Document]:
    """The objects of the loaded documents of a stream (empty ones skipped, `kind: List` flattened), named by
    `path#number`; `before`: how many (non-empty) documents of the stream precede `docs`."""
    index = before
    name = shown(path)
    for doc in docs:
        if doc is None:
            continue
        index += 1
        if not isinstance(doc, dict):
            raise UsageError(f"{name}: document {index} is not a Kubernetes object (a mapping)")
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for item_number, item in enumerate(doc["items"], 1):
                if not isinstance(item, dict):
                    raise UsageError(f"{name}: item {item_number} of document {index} is not a mapping")
                yield Document(f"{name}#{index}.{item_number}", item)
        else:
            yield Document(f"{name}#{index}", doc)


@dataclass
class Inputs:
    trainjobs: list[Document] = field(default_factory=list)
    runtimes: list[Document] = field(default_factory=list)
    old: dict[tuple[str, str], Document] = field(default_factory=dict)
    """With `--old`: the stored TrainJobs an update replaces, by (namespace, name)."""


def refuse_legacy(doc: Document, path: str) -> None:
    """An older-shape object is named for what it is, with the command that converts it."""
    shape = legacy_shape(doc.raw)
    if shape is not None:
        raise UsageError(f"{doc.label} is {shape}; convert it with `{PROG} convert -f {path}` and use the output")


def read_inputs(trainjob_files: Sequence[str], runtime_files: Sequence[str], old_files: Sequence[str] = ()) -> Inputs:
    """Every object of every file, sorted by kind: a file may mix TrainJobs and runtimes (upstream's examples do)."""
    inputs = Inputs()
    found_in_f = 0
    for path, from_f in [(p, True) for p in trainjob_files] + [(p, False) for p in runtime_files]:
        for doc in load_documents(path):
            refuse_legacy(doc, path)
            kind = doc.raw.get("kind")
            if kind == c.TRAINJOB_KIND:
                inputs.trainjobs.append(doc)
            elif kind in c.RUNTIME_KINDS:
                inputs.runtimes.append(doc)
            else:
                raise UsageError(
                    f"{doc.source}: expected kind TrainJob, TrainingRuntime or ClusterTrainingRuntime, got {kind!r}"
                )
            found_in_f += from_f
    if trainjob_files and not found_in_f:
        raise UsageError(f"{', '.join(map(shown, trainjob_files))}: no TrainJob found")
    for path in old_files:
        for doc in load_documents(path):
            if doc.raw.get("kind") != c.TRAINJOB_KIND:
                raise UsageError(f"{doc.source}: expected kind TrainJob, got {doc.raw.get('kind')!r}")
            inputs.old[_key(doc.raw)] = doc
    return inputs


def _key(raw: dict[str, Any]) -> tuple[str, str]:
    found = raw.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


class RuntimeCatalog:
    """Runtimes by (kind, namespace, name); a TrainingRuntime without a namespace serves any namespace,
    as `kubectl apply -n NS` would place it."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str | None, str], RuntimeSource] = {}
        self._invalid: set[tuple[str, str | None, str]] = set()

    def add(self, runtime: TrainingRuntime | ClusterTrainingRuntime) -> None:
        namespace = runtime.metadata.namespace if runtime.kind == c.TRAINING_RUNTIME_KIND else None
        self._by_key[(runtime.kind, namespace, runtime.metadata.name or "")] = RuntimeSource.of(runtime)

    def add_invalid(self, raw: dict[str, Any]) -> None:
        """A runtime the API server would refuse to store: TrainJobs naming it report that, not "not found"."""
        kind, meta = raw.get("kind"), raw.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        namespace = meta.get("namespace") if kind == c.TRAINING_RUNTIME_KIND else None
        self._invalid.add((str(kind), namespace if isinstance(namespace, str) else None, str(meta.get("name", ""))))

    def lookup(self, kind: str, namespace: str, name: str) -> RuntimeSource | None:
        if kind == c.CLUSTER_TRAINING_RUNTIME_KIND:
            return self._by_key.get((kind, None, name))
        return self._by_key.get((kind, namespace, name)) or self._by_key.get((kind, None, name))

    def is_invalid(self, kind: str, namespace: str, name: str) -> bool:
        if kind == c.CLUSTER_TRAINING_RUNTIME_KIND:
            return (kind, None, name) in self._invalid
        return (kind, namespace, name) in self._invalid or (kind, None, name) in self._invalid


@dataclass
class Checked:
    jobs: list[tuple[Document, TrainJob]]
    """TrainJobs that passed every check and whose runtime is known: the ones `render` builds."""
    catalog: RuntimeCatalog
    errors: list[tuple[Document, list[FieldError]]]
    warnings: list[str]
    runtime_count: int
    unusable: list[str] = field(default_factory=list)
    """One line per TrainJob that cannot be checked at all (its runtime is missing): exit 2."""
    trainjob_count: int = 0
    infos: list[RuntimeInfo | None] = field(default_factory=list)
    """Per entry of `jobs`: the runtime info its admission checks read, for `render` to build from (None: make it)."""
    old: dict[tuple[str, str], Document] = field(default_factory=dict)
    """With `--old`: the stored TrainJobs the checked ones update (`Inputs.old`)."""

    @property
    def exit_code(self) -> int:
        return 2 if self.unusable else 1 if self.errors else 0


_DESCRIPTION: Final = re.compile(r"^ *description: .*\n", re.MULTILINE)
"""A field's description in a generated CRD (one line each; a property named `description` is a mapping, never
matched): pruning does not read them, and they are a third of the text to parse."""


@cache
def crd_schema(kind: str) -> Schema | None:
    """The `openAPIV3Schema` of our CRD for `kind`, from the CRDs shipped as package data (`trainjob_operator/crds`,
    the repository's `crds/`); None for another kind (no pruning)."""
    plural = c.PLURALS.get(kind)
    if plural is None:
        return None
    text = resources.files("trainjob_operator").joinpath("crds", f"{c.GROUP}_{plural}.yaml").read_text(encoding="utf-8")
    schema: Schema = yamltext.load(_DESCRIPTION.sub("", text))["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def pruned(doc: Document, warnings: list[str], unknown_fields: str) -> tuple[dict[str, Any], FieldError | None]:
    """The object as the API server would store it, and the API server's refusal when it has fields the schema does
    not know and `unknown_fields` is "strict" (kubectl's default); with "warn" each dropped field is named in a
    warning instead, with "ignore" nowhere."""
    kind = str(doc.raw.get("kind"))
    schema = crd_schema(kind)
    if schema is None:
        return doc.raw, None
    result, paths = prune(doc.raw, schema)
    if not paths or unknown_fields == "ignore":
        return result, None
    if unknown_fields == "warn":
        warnings += [f"{doc.label}: {unknown_field_warning(path)}" for path in sorted(paths)]  # the server's order
        return result, None
    return result, plain(strict_decoding_error(kind, paths))


def check(inputs: Inputs, framework: Framework, unknown_fields: str = "strict") -> Checked:
    """CRD-level and admission validation of every runtime and TrainJob, as the API server and the webhooks
    would run them. A TrainJob whose runtime is not among the inputs is reported in `unusable`; an object the checks
    cannot handle at all raises UsageError."""
    return check_trainjobs(inputs.trainjobs, check_runtimes(inputs, unknown_fields), framework, unknown_fields)


@contextlib.contextmanager
def _checking() -> Iterator[None]:
    """A crash of the checks on some input becomes a clear error, never a traceback."""
    try:
        yield
    except UsageError:
        raise
    except Exception as err:
        raise UsageError(f"cannot check the input: {describe(err)}") from err


def check_runtimes(inputs: Inputs, unknown_fields: str = "strict") -> Checked:
    """The runtimes' checks: their catalog for the TrainJobs, and what is wrong with them (`check`)."""
    with _checking():
        return _check_runtimes(inputs, unknown_fields)


def check_trainjobs(
    trainjobs: Sequence[Document], runtimes: Checked, framework: Framework, unknown_fields: str = "strict"
) -> Checked:
    """The TrainJobs' checks (`check`), after what `check_runtimes` found, which the result goes on from."""
    with _checking():
        return _check_trainjobs(trainjobs, runtimes, framework, unknown_fields)


def _check_runtimes(inputs: Inputs, unknown_fields: str) -> Checked:
    catalog = RuntimeCatalog()
    errors: list[tuple[Document, list[FieldError]]] = []
    warnings: list[str] = []
    for doc in inputs.runtimes:
        raw, refused = pruned(doc, warnings, unknown_fields)
        if refused is not None:  # the API server stops there: nothing else is checked
            catalog.add_invalid(doc.raw)
            errors.append((doc, [refused]))
            continue
        runtime, result = check_runtime(raw)
        problems = list(result.errors)
        if runtime is not None:
            admission = admit_runtime(runtime)
            # a rule both the CRD and the webhook enforce is reported once, as the API server stops at the CRD
            problems += [e for e in admission.errors if str(e) not in {str(p) for p in problems}]
            warnings += admission.warnings
            catalog.add(runtime)
        else:
            catalog.add_invalid(doc.raw)
        if problems:
            errors.append((doc, problems))
    return Checked([], catalog, errors, warnings, len(inputs.runtimes), old=inputs.old)


def _check_trainjobs(
    trainjobs: Sequence[Document], runtimes: Checked, framework: Framework, unknown_fields: str
) -> Checked:
    catalog = runtimes.catalog
    errors, warnings, unusable = list(runtimes.errors), list(runtimes.warnings), list(runtimes.unusable)
    jobs: list[tuple[Document, TrainJob]] = []
    infos: list[RuntimeInfo | None] = []
    for doc in trainjobs:
        raw, refused = pruned(doc, warnings, unknown_fields)
        if refused is not None:  # the API server stops there: nothing else is checked
            errors.append((doc, [refused]))
            continue
        stored = runtimes.old.get(_key(doc.raw))
        job, result = check_trainjob(raw, stored.raw if stored is not None else None)
        problems = list(result.errors)
        old_job = parse(TrainJob, stored.raw)[0] if stored is not None else None
        if job is not None:
            ref = job.spec.runtime_ref
            kind = ref.kind or ""
            if (
                ref.api_group == c.GROUP
                and kind in c.RUNTIME_KINDS
                and catalog.lookup(kind, job.namespace, ref.name) is None
            ):
                where = f"{job.namespace}/{ref.name}" if kind == c.TRAINING_RUNTIME_KIND else ref.name
                if catalog.is_invalid(kind, job.namespace, ref.name):
                    problems.append(
                        invalid(
                            "spec.runtimeRef",
                            ref.to_wire(),
                            f"{kind} {where} is invalid (its errors are listed above): the API "
                            "server would not have stored it",
                        )
                    )
                    errors.append((doc, problems))
                else:
                    unusable.append(f"{doc.label}: runtime {kind} {where} not found in the -r files")
                    if problems:
                        errors.append((doc, problems))
                continue
            info = reusable_info(job, catalog.lookup(kind, job.namespace, ref.name))
            admission = admit_trainjob(framework, old_job, job, catalog.lookup, info=info)
            problems += admission.errors
            warnings += admission.warnings
            if not problems:
                jobs.append((doc, job))
                infos.append(info)
        if problems:
            errors.append((doc, problems))
    return Checked(
        jobs, catalog, errors, warnings, runtimes.runtime_count, unusable, len(trainjobs), infos, runtimes.old
    )


def reusable_info(job: TrainJob, runtime: RuntimeSource | None) -> RuntimeInfo | None:
    """The TrainJob's runtime info before the build phase, made once for both the admission checks and `render`
    (validators only read it), or None to leave both to make their own: when it cannot be made (the checks make it
    again and report why, or raise, as before) or when a replicated job has no pod spec (a validator asking for it
    would add an empty one)."""
    if runtime is None:
        return None
    try:
        info = new_runtime_info(job, runtime)
    except Exception:  # the checks make it again and report (or raise) exactly as they always did
        return None
    if any(pod_set.job.template.spec.template.spec is None for pod_set in info.pod_sets):
        return None
    return info


def lifecycle_notes(checked: Checked) -> list[str]:
    """The effective run policy of each TrainJob that has one (its own fields over its runtime's runPolicy)."""
    notes = []
    for _, job in checked.jobs:
        ref = job.spec.runtime_ref
        runtime = checked.catalog.lookup(ref.kind or "", job.namespace, ref.name)
        policy = effective_run_policy(job, runtime.spec.run_policy if runtime is not None else None).to_wire()
        if policy:
            settings = ", ".join(f"{k}={v}" for k, v in policy.items())
            notes.append(f"run policy of TrainJob {job.namespace}/{job.name}: {settings}")
    return notes


@dataclass
class Outcome:
    """What `validate` or `render` has to say about some TrainJobs (and runtimes), as text. Outcomes of consecutive
    runs of the input add up (`+`) to the outcome of the whole, which is how forked workers' slices merge."""

    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Each invalid object's field errors, then its `invalid: ...` line."""
    invalid: int = 0
    unusable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """The lifecycle notes, said only when nothing is invalid."""
    built: str = ""
    """What the build phase said on stderr (objects it cannot build, foreign managers), in input order."""
    unbuilt: int = 0
    objects: int = 0
    texts: list[str] = field(default_factory=list)
    """Per run of objects: the objects as `render -o` writes them, without the JSON List around them (`write_objects`
    joins them)."""
    trainjobs: int = 0
    runtimes: int = 0

    def __add__(self, other: "Outcome") -> "Outcome":
        """Field by field: lists and texts follow each other, counts add up."""
        return Outcome(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def exit_code(self) -> int:
        return 2 if self.unusable or self.unbuilt else 1 if self.invalid else 0


_JSON_HEAD: Final = '{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [\n'
_JSON_TAIL: Final = "\n  ]\n}"


def outcome(checked: Checked, framework: Framework, output: str | None) -> Outcome:
    """`checked` said as text; with an `output` (`render`), its TrainJobs built and written in that format."""
    said = Outcome(
        warnings=checked.warnings,
        invalid=len(checked.errors),
        unusable=list(checked.unusable),
        notes=lifecycle_notes(checked),
        trainjobs=checked.trainjob_count,
        runtimes=checked.runtime_count,
    )
    for doc, problems in checked.errors:
        said.errors += [str(problem) for problem in problems]
        said.errors.append(f"invalid: {doc.label}: {len(problems)} error(s)")
    if output is not None:
        messages = io.StringIO()
        objects = render(checked, framework, messages)
        said.built = messages.getvalue()
        said.unbuilt = len(checked.unusable) - len(said.unusable)
        said.objects = len(objects)
        said.texts = [items_text(objects, output)] if objects else []
    return said


def items_text(objects: list[dict[str, Any]], output: str) -> str:
    """The objects as `dump` writes them, without JSON's List around them: `write_objects` puts it back."""
    if output != "json":
        return yamldump.dump_all(objects)
    text = jsontext.indented({"apiVersion": "v1", "kind": "List", "items": objects})
    if not (text.startswith(_JSON_HEAD) and text.endswith(_JSON_TAIL)):  # every JSON encoder indents alike
        raise AssertionError("unexpected JSON layout of a List")
    return text[len(_JSON_HEAD) : -len(_JSON_TAIL)]


def write_objects(said: Outcome, output: str, out: TextIO) -> None:
    """What `dump` writes for the objects of `said`, run by run (megabytes each: not joined first). YAML documents
    follow each other, JSON List items take a comma between."""
    if output == "json" and not said.texts:
        out.write(jsontext.indented({"apiVersion": "v1", "kind": "List", "items": []}) + "\n")
        return
    as_json = output == "json"
    out.write(_JSON_HEAD if as_json else "")
    for number, text in enumerate(said.texts):
        out.write(",\n" if as_json and number else "")
        out.write(text)
    out.write(_JSON_TAIL + "\n" if as_json else "")


def report(said: Outcome, err: TextIO) -> None:
    for warning in said.warnings:
        print(printable(f"Warning: {warning}"), file=err)
    for line in said.errors:
        print(printable(line), file=err)
    for line in said.unusable:
        print(printable(f"{PROG}: error: {line}"), file=err)
    if not said.invalid:
        for note in said.notes:
            print(printable(note), file=err)


PER_WORKER = 100
"""TrainJobs a forked worker gets at the least: fewer are done sooner than a process is forked and its work merged."""

Unit = tuple[str, yamltext.Chunk | str]
"""Part of a TrainJob file: its path and a run of its documents, or its whole text."""


def in_workers(
    trainjob_files: Sequence[str],
    runtime_files: Sequence[str],
    old_files: Sequence[str],
    framework: Framework,
    output: str | None,
    workers: int,
    unknown_fields: str = "strict",
) -> Outcome | None:
    """The outcome of the input, with its TrainJob files cut into runs of whole documents
    (`yamltext.document_chunks`), each run loaded, checked and rendered in one of `workers` forked processes; the
    runtimes are checked once, before. None when the input does not suit (fewer than `PER_WORKER` TrainJobs per
    worker; a runtime among the TrainJobs, or a TrainJob among the runtimes, whose order the one-process path keeps)
    or anything at all fails:
    the caller then does it all in one process, which says what is wrong and where."""
    try:
        texts = [(path, read_text(path)) for path in trainjob_files]
        starts = [text.count("\n---") for _, text in texts]  # about the number of documents
        if sum(starts) < 2 * PER_WORKER:
            return None  # a short input is done before a worker is forked
        units: list[Unit] = []
        for (path, text), count in zip(texts, starts, strict=True):
            chunks = yamltext.document_chunks(text, min(workers, count // PER_WORKER))
            units += [(path, chunk) for chunk in chunks] if chunks is not None else [(path, text)]
        if len(units) < 2:
            return None
        inputs = read_inputs([], runtime_files, old_files)
        if inputs.trainjobs:
            return None
        runtimes = check_runtimes(inputs, unknown_fields)
        crd_schema(c.TRAINJOB_KIND)  # loaded once, before the workers are forked
    except Exception:  # the one-process path reports it
        return None
    groups = _groups(units, workers)

    def group_outcome(group: int) -> Outcome:
        trainjobs: list[Document] = []
        for path, run in groups[group]:
            if isinstance(run, yamltext.Chunk):
                loaded = documents(path, yamltext.load_chunk(run), before=run.first)
            else:
                loaded = documents(path, yamltext.load_all(run))
            for doc in loaded:
                refuse_legacy(doc, path)
                if doc.raw.get("kind") != c.TRAINJOB_KIND:
                    raise UsageError(f"{doc.source}: not a TrainJob")  # the one-process path decides what it is
                trainjobs.append(doc)
        catalog_only = Checked([], runtimes.catalog, [], [], 0, old=runtimes.old)
        return outcome(check_trainjobs(trainjobs, catalog_only, framework, unknown_fields), framework, output)

    said = forked.forked_map(group_outcome, range(len(groups)))
    if said is None:
        return None
    total = outcome(runtimes, framework, None)
    for part in said:
        total += part
    return total if total.trainjobs else None  # "no TrainJob found" is the one-process path's to say


def _groups(units: list[Unit], workers: int) -> list[list[Unit]]:
    """Consecutive units in at most `workers` groups of about equal text."""
    sizes = [len(run.text if isinstance(run, yamltext.Chunk) else run) for _, run in units]
    total, seen = sum(sizes), 0
    groups: list[list[Unit]] = [[] for _ in range(workers)]
    for unit, size in zip(units, sizes, strict=True):
        groups[min(workers - 1, seen * workers // max(total, 1))].append(unit)
        seen += size
    return [group for group in groups if group]


def foreign_manager(job: TrainJob) -> str | None:
    """The controller named in `spec.managedBy` when it is not this operator (the reconciler skips those)."""
    managed_by = job.spec.managed_by
    return managed_by if managed_by not in (None, c.DEFAULT_MANAGED_BY) else None


def render(checked: Checked, framework: Framework, err: TextIO) -> list[dict[str, Any]]:
    """The objects of every checked TrainJob; one that cannot be built is reported (exit 2), the others go on."""
    objects: list[dict[str, Any]] = []
    infos = checked.infos if len(checked.infos) == len(checked.jobs) else [None] * len(checked.jobs)
    checked.infos = []  # the build phase changes them: used once
    for (doc, job), info in zip(checked.jobs, infos, strict=True):
        ref = job.spec.runtime_ref
        runtime = checked.catalog.lookup(ref.kind or "", job.namespace, ref.name)
        assert runtime is not None  # check() kept only TrainJobs with a runtime
        manager = foreign_manager(job)
        if manager is not None:
            print(
                printable(
                    f"Warning: {doc.label}: spec.managedBy is {manager!r}: trainjob-operator does not reconcile this "
                    f"TrainJob and would not build the objects below (upstream's runtime builds them; the controller "
                    f"named in managedBy decides)"
                ),
                file=err,
            )
        try:
            if not job.name:
                raise BuildError(
                    "metadata.name is not set: the objects are named after the name the API server generates from "
                    "metadata.generateName; set metadata.name to render them"
                )
            built = [build_snapshot(job, runtime), *framework.desired_objects(job, runtime, RENDERING, info=info)]
        except BuildError as error:
            line = f"{doc.label}: cannot build: {error}"
        except Exception as error:  # the pure pipeline crashed on this input: name the object and the cause
            line = f"{doc.label}: cannot build: {describe(error)}"
        else:
            objects += built
            continue
        checked.unusable.append(line)
        print(printable(f"{PROG}: error: {line}"), file=err)
    return objects


def dump(objects: list[dict[str, Any]], output: str, out: TextIO) -> None:
    if output == "json":
        out.write(jsontext.indented({"apiVersion": "v1", "kind": "List", "items": objects}))
        out.write("\n")
    else:
        out.write(yamldump.dump_all(objects))


@dataclass
class Conversion:
    """What `convert` made: the objects for stdout, as documents named after their input, and what it said."""

    docs: list[Document] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    """stderr, in input order: fields without a home, the runtime each TrainJob got, one summary per object."""
    exit_code: int = 0


def convert_files(
    paths: Sequence[str], runtime: str | None = None, choices: Sequence[RuntimeChoice] = (), given: bool = False
) -> Conversion:
    """Every object of the files, older shapes converted; what has no home is said by path. A converted TrainJob
    without a runtime gets `runtime` (`--runtime`) or the one of `choices` that suits it best (`choose_runtime`), and
    says which; `given`: the choices are the -r files' (the caller checks the output against them)."""
    done = Conversion()
    for path in paths:
        for doc in load_documents(path):
            shape = legacy_shape(doc.raw)
            if shape is None:
                what = "already current" if doc.raw.get("apiVersion") == c.API_VERSION else "not a Trainer object"
                done.lines.append(f"unchanged: {doc.label}: {what}")
                done.docs.append(doc)
                continue
            result = convert(doc.raw)
            done.lines += [str(dropped) for dropped in result.dropped]
            obj = result.obj
            if obj["kind"] == c.TRAINJOB_KIND:
                obj = _with_a_runtime(obj, doc.label, runtime, choices, given, done)
            summary = f"{len(result.dropped)} field(s) without a home"
            done.lines.append(f"converted: {doc.label} -> {c.API_VERSION} ({summary})")
            done.docs.append(Document(doc.source, obj))
    return done


def _with_a_runtime(
    obj: dict[str, Any],
    label: str,
    runtime: str | None,
    choices: Sequence[RuntimeChoice],
    given: bool,
    done: Conversion,
) -> dict[str, Any]:
    ref = obj["spec"].get("runtimeRef")
    if runtime is not None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        named = [ch for ch in choices if ch.name == runtime and ch.namespace in (None, namespace)]
        choice = named[0] if named else RuntimeChoice(c.CLUSTER_TRAINING_RUNTIME_KIND, runtime)
        was = f"; it named {render_value(ref.get('name'))}" if isinstance(ref, dict) else ""
        done.lines.append(f"runtime: {label}: spec.runtimeRef is {choice} (--runtime{was})")
        return with_runtime(obj, choice)
    if isinstance(ref, dict):
        return obj
    chosen = choose_runtime(obj, choices)
    if chosen is None:
        done.lines.append(
            f"{PROG}: error: {label}: no spec.runtimeRef, and no runtime of the -r files may serve it: name one with "
            "--runtime NAME"
        )
        done.exit_code = 2
        return obj
    choice, why = chosen
    done.lines.append(
        f"runtime: {label}: no runtime named; spec.runtimeRef is {choice} ({why}); --runtime NAME names another"
    )
    if not given:  # with -r, checking the output says it (and hints) in the API server's words
        for what in sorted(initializers_of(obj) - choice.initializers):
            done.lines.append(f"hint: {label}: {initializer_hint(what, str(choice), choices)}")
    return with_runtime(obj, choice)


def check_converted(done: Conversion, runtime_files: Sequence[str], framework: Framework) -> tuple[Outcome, list[str]]:
    """The converted TrainJobs checked against the runtimes of the -r files and of the output itself, as `validate`
    would; with a hint for each TrainJob whose initializer its runtime has no job for."""
    inputs = read_inputs([], runtime_files)
    choices = [choice for d in inputs.runtimes if (choice := RuntimeChoice.of(d.raw)) is not None]
    for doc in done.docs:
        kind = doc.raw.get("kind")
        if kind == c.TRAINJOB_KIND:
            inputs.trainjobs.append(doc)
        elif kind in c.RUNTIME_KINDS:
            inputs.runtimes.append(doc)
    checked = check(inputs, framework)
    hints = []
    for doc, problems in checked.errors:
        ref = (doc.raw.get("spec") or {}).get("runtimeRef") or {}
        runtime = f"{ref.get('kind') or c.CLUSTER_TRAINING_RUNTIME_KIND} {render_value(ref.get('name'))}"
        for what, job in (("dataset", c.DATASET_INITIALIZER), ("model", c.MODEL_INITIALIZER)):
            if any(f"must have {job} job" in str(problem) for problem in problems):
                hints.append(f"hint: {doc.label}: {initializer_hint(what, runtime, choices)}")
    return outcome(checked, framework, None), hints


def parser() -> argparse.ArgumentParser:
    p = flags.OneLineParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="`COMMAND --help` for its flags")
    for name, help_text in (
        ("render", "print every object the operator would apply for the TrainJobs"),
        ("validate", "run CRD-level and admission validation on TrainJobs and runtimes"),
    ):
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        _file_flags(cmd, "TrainJobs (and runtimes)")
        cmd.add_argument(
            "-r",
            "--runtimes",
            action="append",
            default=[],
            metavar="FILE",
            help="TrainingRuntimes / ClusterTrainingRuntimes: a file, a directory or - (stdin); repeatable",
        )
        cmd.add_argument(
            "--validate",
            type=field_validation,
            default="strict",
            metavar="MODE",
            help="what a field the CRD does not know does, as kubectl's --validate: strict (default; the object is "
            "invalid), warn (pruned, with a warning) or ignore (pruned silently); true/false mean strict/ignore",
        )
        cmd.add_argument(
            "--workers",
            type=flags.positive_int,
            metavar="N",
            help=f"processes for a long input (at least {PER_WORKER} TrainJobs each, at most {forked.MAX_WORKERS}); "
            "the default is one per usable CPU",
        )
        if name == "render":
            _output_flag(cmd, "the objects")
        else:
            cmd.add_argument(
                "--old",
                action="append",
                default=[],
                metavar="FILE",
                help="the stored TrainJobs that -f updates (matched by namespace/name): also run the "
                "update rules (immutable fields, resize while suspended); repeatable",
            )
    conv_help = (
        "rewrite proposal-era (kubeflow.org/v2alpha1) and early v1alpha1 TrainJobs and runtimes as "
        "trainer.kubeflow.org/v1alpha1; stderr lists what has no home and the runtime each TrainJob got"
    )
    conv = sub.add_parser("convert", help=conv_help, description=conv_help)
    _file_flags(conv, "objects to convert")
    conv.add_argument(
        "-r",
        "--runtimes",
        action="append",
        default=[],
        metavar="FILE",
        help="the runtimes the TrainJobs will run with: the output is validated against them (exit 1 when invalid) "
        "and a TrainJob without a runtime gets the one that suits it best (default: this project's runtimes)",
    )
    conv.add_argument(
        "--runtime",
        metavar="NAME",
        help="the runtime every converted TrainJob names (spec.runtimeRef; a TrainingRuntime of that name in the -r "
        "files, else the ClusterTrainingRuntime)",
    )
    _output_flag(conv, "the converted objects")
    sub.add_parser("run", help="run the operator (controller manager and webhooks); `run --help` for its flags")
    sub.add_parser("ui", help="a read-only web UI over TrainJobs with your kubeconfig; `ui --help` for its flags")
    return p


def _file_flags(cmd: argparse.ArgumentParser, what: str) -> None:
    cmd.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help=f"{what}: a YAML or JSON file, a directory of .json/.yaml/.yml files, or - (stdin); repeatable",
    )
    cmd.add_argument(
        "-R", "--recursive", action="store_true", help="read the directories of -f and -r with their subdirectories"
    )


def _output_flag(cmd: argparse.ArgumentParser, what: str) -> None:
    cmd.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help=f"{what} as a YAML stream (default) or as one JSON List",
    )


def field_validation(text: str) -> str:
    """kubectl's `--validate` value: strict, warn or ignore (true and false are strict and ignore)."""
    value = {"true": "strict", "false": "ignore"}.get(text.lower(), text.lower())
    if value not in FIELD_VALIDATION:
        raise argparse.ArgumentTypeError(f"{render_value(text)} is not one of strict, warn, ignore (or true, false)")
    return value


def fail(message: str, code: int) -> NoReturn:
    print(printable(f"{PROG}: error: {message}"), file=sys.stderr)
    raise SystemExit(code)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        # kopf's default registry probes for Kubernetes client libraries at import time and would keep ~60 MiB of
        # the `kubernetes` package in memory; the operator logs in by itself, so the probe must find none.
        probed = ("kubernetes", "kubernetes_asyncio", "pykube")
        saved = {name: sys.modules.get(name) for name in probed}
        for name in probed:
            sys.modules[name] = None  # type: ignore[assignment]  # an import of it raises ImportError
        try:
            from .controller.main import run  # imported lazily: only the operator needs kopf
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
        return int(run(argv[1:]))
    if argv[:1] == ["ui"]:
        from .ui.server import run as run_ui  # imported lazily: aiohttp's server only for the UI

        return int(run_ui(argv[1:]))
    args = parser().parse_args(argv)
    _stdin_text.clear()
    # A batch whose memory the input bounds: the cyclic collector would only walk the ever-growing heap of documents
    # and objects over and over (7% of `render`'s CPU for 2,000 TrainJobs); reference counting frees the rest.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _offline(args)
    finally:
        if collecting:
            gc.enable()


def _convert(args: argparse.Namespace) -> int:
    """`convert`: the objects on stdout, what became of each on stderr; with -r, the TrainJobs checked as `validate`
    would, the output written all the same (exit 1 when invalid, for the user to fix)."""
    trainjob_files = expand_paths(args.filename, args.recursive)
    runtime_files = expand_paths(args.runtimes, args.recursive)
    if (trainjob_files + runtime_files).count(STDIN) > 1:
        raise UsageError("- (stdin) is given more than once; it can be read only once")
    choices = [
        choice
        for path in runtime_files
        for doc in load_documents(path)
        if (choice := RuntimeChoice.of(doc.raw)) is not None
    ]
    done = convert_files(trainjob_files, args.runtime, choices or SHIPPED_RUNTIMES, bool(runtime_files))
    for line in done.lines:
        print(printable(line), file=sys.stderr)
    code = done.exit_code
    if runtime_files and code == 0:
        said, hints = check_converted(done, runtime_files, Framework.from_registry())
        report(said, sys.stderr)
        for hint in hints:
            print(printable(hint), file=sys.stderr)
        code = said.exit_code
    dump([doc.raw for doc in done.docs], args.output, sys.stdout)
    return code


def _offline(args: argparse.Namespace) -> int:
    """`render`, `validate` and `convert`."""
    if args.command == "convert":
        try:
            return _convert(args)
        except UsageError as err:
            fail(str(err), 2)
        except BrokenPipeError:
            sys.stderr.close()
        return 0
    framework = Framework.from_registry()
    workers = forked.workers(args.workers)
    output = args.output if args.command == "render" else None
    try:
        files = (
            expand_paths(args.filename, args.recursive),
            expand_paths(args.runtimes, args.recursive),
            expand_paths(getattr(args, "old", []), args.recursive),
        )
        if sum(paths.count(STDIN) for paths in files) > 1:
            raise UsageError("- (stdin) is given more than once; it can be read only once")
        said = in_workers(*files, framework, output, workers, args.validate) if workers > 1 else None
        if said is None:
            said = outcome(check(read_inputs(*files), framework, args.validate), framework, output)
        report(said, sys.stderr)
        if output is None:
            if said.exit_code == 0:
                print(f"valid: {said.trainjobs} TrainJob(s), {said.runtimes} runtime(s)", file=sys.stderr)
            return said.exit_code
        sys.stderr.write(said.built)
        if said.objects or said.exit_code == 0:
            write_objects(said, output, sys.stdout)
        return said.exit_code
    except UsageError as err:
        fail(str(err), 2)
    except RecursionError as err:
        fail(f"the input nests too deeply: {describe(err)}", 2)
    except BrokenPipeError:  # `render ... | head` closed the pipe: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
