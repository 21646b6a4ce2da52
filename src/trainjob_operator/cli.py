"""`trainjob-operator`: render and validate TrainJobs offline, exactly as the operator would.

Exit codes: 0 success; 1 invalid input (field errors on stderr as `<field path>: <message>`);
2 unusable input (unreadable file, bad YAML, unknown kind, missing runtime) with one line naming it.
"""

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TextIO

import yaml

from .api import constants as c
from .api.runtime import ClusterTrainingRuntime, TrainingRuntime
from .api.trainjob import TrainJob
from .runtime import yamltext
from .runtime.errors import BuildError, FieldError, describe
from .runtime.info import RuntimeSource
from .runtime.pipeline import Framework
from .runtime.snapshot import build_snapshot
from .runtime.validation import admit_runtime, admit_trainjob, check_runtime, check_trainjob

PROG = "trainjob-operator"
RUNTIME_KINDS = (c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND)

try:
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # PyYAML built without libyaml
    _Dumper = yaml.SafeDumper


def _represent_str(dumper: Any, value: str) -> Any:
    """Multi-line strings (hostfiles, snapshots) as readable literal blocks."""
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


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


def load_documents(path: str) -> Iterator[Document]:
    """Every object of a YAML stream; `kind: List` objects are flattened."""
    try:
        with open(path, "rb") as stream:
            text = stream.read().decode("utf-8")
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise UsageError(f"{path}: not UTF-8 text (byte {err.start})") from err
    try:
        docs = yamltext.load_all(text)
    except yamltext.YamlError as err:
        raise UsageError(f"{path}: {err}") from err
    index = 0
    for doc in docs:
        if doc is None:
            continue
        index += 1
        if not isinstance(doc, dict):
            raise UsageError(f"{path}: document {index} is not a Kubernetes object (a mapping)")
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for item_number, item in enumerate(doc["items"], 1):
                if not isinstance(item, dict):
                    raise UsageError(f"{path}: item {item_number} of document {index} is not a mapping")
                yield Document(f"{path}#{index}.{item_number}", item)
        else:
            yield Document(f"{path}#{index}", doc)


@dataclass
class Inputs:
    trainjobs: list[Document] = field(default_factory=list)
    runtimes: list[Document] = field(default_factory=list)


def read_inputs(trainjob_files: Sequence[str], runtime_files: Sequence[str]) -> Inputs:
    inputs = Inputs()
    for path in trainjob_files:
        for doc in load_documents(path):
            if doc.raw.get("kind") != c.TRAINJOB_KIND:
                raise UsageError(f"{doc.source}: expected kind TrainJob, got {doc.raw.get('kind')!r}")
            inputs.trainjobs.append(doc)
    for path in runtime_files:
        for doc in load_documents(path):
            if doc.raw.get("kind") not in RUNTIME_KINDS:
                raise UsageError(
                    f"{doc.source}: expected kind TrainingRuntime or ClusterTrainingRuntime, got "
                    f"{doc.raw.get('kind')!r}"
                )
            inputs.runtimes.append(doc)
    if not inputs.trainjobs and trainjob_files:
        raise UsageError(f"{', '.join(trainjob_files)}: no TrainJob found")
    return inputs


class RuntimeCatalog:
    """Runtimes by (kind, namespace, name); a TrainingRuntime without a namespace serves any namespace,
    as `kubectl apply -n NS` would place it."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str | None, str], RuntimeSource] = {}

    def add(self, runtime: TrainingRuntime | ClusterTrainingRuntime) -> None:
        namespace = runtime.metadata.namespace if runtime.kind == c.TRAINING_RUNTIME_KIND else None
        self._by_key[(runtime.kind, namespace, runtime.metadata.name or "")] = RuntimeSource.of(runtime)

    def lookup(self, kind: str, namespace: str, name: str) -> RuntimeSource | None:
        if kind == c.CLUSTER_TRAINING_RUNTIME_KIND:
            return self._by_key.get((kind, None, name))
        return self._by_key.get((kind, namespace, name)) or self._by_key.get((kind, None, name))


@dataclass
class Checked:
    jobs: list[tuple[Document, TrainJob]]
    catalog: RuntimeCatalog
    errors: list[tuple[Document, list[FieldError]]]
    warnings: list[str]
    runtime_count: int


def check(inputs: Inputs, framework: Framework) -> Checked:
    """CRD-level and admission validation of every runtime and TrainJob. Raises UsageError for a
    TrainJob whose runtime is not among the inputs, or an object the checks cannot handle at all."""
    try:
        return _check(inputs, framework)
    except UsageError:
        raise
    except Exception as err:  # a crash of the checks on some input: a clear error, never a traceback
        raise UsageError(f"cannot check the input: {describe(err)}") from err


def _check(inputs: Inputs, framework: Framework) -> Checked:
    catalog = RuntimeCatalog()
    errors: list[tuple[Document, list[FieldError]]] = []
    warnings: list[str] = []
    for doc in inputs.runtimes:
        runtime, result = check_runtime(doc.raw)
        problems = list(result.errors)
        if runtime is not None:
            admission = admit_runtime(runtime)
            problems += admission.errors
            warnings += admission.warnings
            catalog.add(runtime)
        if problems:
            errors.append((doc, problems))
    jobs: list[tuple[Document, TrainJob]] = []
    for doc in inputs.trainjobs:
        job, result = check_trainjob(doc.raw)
        problems = list(result.errors)
        if job is not None:
            ref = job.spec.runtime_ref
            if ref.api_group == c.GROUP and ref.kind in RUNTIME_KINDS and \
                    catalog.lookup(ref.kind or "", job.namespace, ref.name) is None:
                where = f"{job.namespace}/{ref.name}" if ref.kind == c.TRAINING_RUNTIME_KIND else ref.name
                raise UsageError(f"{doc.label}: runtime {ref.kind} {where} not found in the -r files")
            admission = admit_trainjob(framework, None, job, catalog.lookup)
            problems += admission.errors
            warnings += admission.warnings
            jobs.append((doc, job))
        if problems:
            errors.append((doc, problems))
    return Checked(jobs, catalog, errors, warnings, len(inputs.runtimes))


def report(checked: Checked, err: TextIO) -> bool:
    for warning in checked.warnings:
        print(f"Warning: {warning}", file=err)
    for doc, problems in checked.errors:
        for problem in problems:
            print(str(problem), file=err)
        print(f"invalid: {doc.label}: {len(problems)} error(s)", file=err)
    return not checked.errors


def render(checked: Checked, framework: Framework) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for doc, job in checked.jobs:
        ref = job.spec.runtime_ref
        runtime = checked.catalog.lookup(ref.kind or "", job.namespace, ref.name)
        assert runtime is not None  # check() refused missing runtimes
        try:
            objects.append(build_snapshot(job, runtime))
            objects += framework.desired_objects(job, runtime)
        except BuildError as error:
            raise UsageError(f"{doc.label}: cannot build: {error}") from error
        except Exception as error:  # the pure pipeline crashed on this input: name the object and the cause
            raise UsageError(f"{doc.label}: cannot build: {describe(error)}") from error
    return objects


def dump(objects: list[dict[str, Any]], output: str, out: TextIO) -> None:
    if output == "json":
        json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, out, indent=2)
        out.write("\n")
    else:
        out.write(yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, explicit_start=True))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_text in (("render", "print every object the operator would apply for the TrainJobs"),
                            ("validate", "run CRD-level and admission validation on TrainJobs and runtimes")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("-f", "--filename", action="append", required=True, metavar="TRAINJOBS.yaml",
                         help="TrainJobs (a YAML stream); repeatable")
        cmd.add_argument("-r", "--runtimes", action="append", default=[], metavar="RUNTIMES.yaml",
                         help="TrainingRuntimes / ClusterTrainingRuntimes (a YAML stream); repeatable")
        if name == "render":
            cmd.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    sub.add_parser("run", help="run the operator (controller manager and webhooks); `run --help` for its flags")
    return p


def fail(message: str, code: int) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
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
    args = parser().parse_args(argv)
    framework = Framework.from_registry()
    try:
        checked = check(read_inputs(args.filename, args.runtimes), framework)
        if not report(checked, sys.stderr):
            return 1
        if args.command == "validate":
            print(f"valid: {len(checked.jobs)} TrainJob(s), {checked.runtime_count} runtime(s)", file=sys.stderr)
            return 0
        dump(render(checked, framework), args.output, sys.stdout)
        return 0
    except UsageError as err:
        fail(str(err), 2)
    except RecursionError as err:
        fail(f"the input nests too deeply: {describe(err)}", 2)
    except BrokenPipeError:  # `render ... | head` closed the pipe: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
