"""`validate`'s checks: every runtime and TrainJob of the input through the CRD's rules (pruning unknown fields as
the API server does) and the admission review the webhooks run (`runtime/review.py`), runtimes found by the
operator's lookup rules among the -r files."""

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Final

from ..api import constants as c
from ..api.runtime import ClusterTrainingRuntime, TrainingRuntime
from ..api.trainjob import TrainJob
from ..codec import yamltext
from ..runtime.errors import FieldError, describe, invalid, plain
from ..runtime.info import RuntimeInfo, RuntimeSource, new_runtime_info
from ..runtime.lifecycle import effective_run_policy
from ..runtime.pipeline import Framework
from ..runtime.prune import Schema, prune, strict_decoding_error, unknown_field_warning
from ..runtime.review import RuntimeKey, review_runtime, review_trainjob, runtime_key
from ..runtime.validation import check_runtime, check_trainjob, parse
from .inputs import Document, Inputs, UsageError, name_key


class RuntimeCatalog:
    """The runtimes of the -r files by the operator's lookup rules (`RuntimeKey`); a TrainingRuntime without a
    namespace serves any namespace, as `kubectl apply -n NS` would place it."""

    def __init__(self) -> None:
        self._by_key: dict[RuntimeKey, RuntimeSource] = {}
        self._invalid: set[RuntimeKey] = set()

    def add(self, runtime: TrainingRuntime | ClusterTrainingRuntime) -> None:
        key = RuntimeKey.of(runtime.kind, runtime.metadata.namespace, runtime.metadata.name or "")
        self._by_key[key] = RuntimeSource.of(runtime)

    def add_invalid(self, raw: dict[str, Any]) -> None:
        """A runtime the API server would refuse to store: TrainJobs naming it report that, not "not found"."""
        kind, meta = raw.get("kind"), raw.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        namespace = meta.get("namespace")
        self._invalid.add(
            RuntimeKey.of(str(kind), namespace if isinstance(namespace, str) else None, str(meta.get("name", "")))
        )

    def get(self, key: RuntimeKey) -> RuntimeSource | None:
        found = self._by_key.get(key)
        if found is None and key.namespace:  # a TrainingRuntime given without a namespace serves them all
            found = self._by_key.get(RuntimeKey(key.kind, "", key.name))
        return found

    def lookup(self, kind: str, namespace: str, name: str) -> RuntimeSource | None:
        return self.get(RuntimeKey.of(kind, namespace, name))

    def is_invalid(self, key: RuntimeKey) -> bool:
        return key in self._invalid or (bool(key.namespace) and RuntimeKey(key.kind, "", key.name) in self._invalid)


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


_SAME_SCHEMA: Final = MappingProxyType({c.CLUSTER_TRAINING_RUNTIME_KIND: c.TRAINING_RUNTIME_KIND})
"""Kinds whose CRD is generated from the same model as another kind's, so their schemas are equal: parsing the YAML
of a runtime CRD is a sixth of a `validate` process's start-up, and it is done once for both
(tests/unit/shipped/test_crds.py compares each kind's schema with its own file)."""


@cache
def crd_schema(kind: str) -> Schema | None:
    """The `openAPIV3Schema` of our CRD for `kind`, from the CRDs shipped as package data (`trainjob_operator/crds`,
    the repository's `crds/`); None for another kind (no pruning)."""
    if kind in _SAME_SCHEMA:
        return crd_schema(_SAME_SCHEMA[kind])
    plural = c.PLURALS.get(kind)
    if plural is None:
        return None
    text = resources.files("trainjob_operator").joinpath("crds", f"{c.GROUP}_{plural}.yaml").read_text(encoding="utf-8")
    schema: Schema = yamltext.load_shipped(_DESCRIPTION.sub("", text))["spec"]["versions"][0]["schema"][
        "openAPIV3Schema"
    ]
    return schema


@cache
def runtime_schema(kind: str, ml_sources: tuple[str, ...]) -> Schema | None:
    """`crd_schema(kind)` for a runtime kind, with every `mlPolicy` source among `ml_sources`
    (`Framework.one_ml_policy_sources`) that the shipped CRD lacks kept whole: a framework plugin registered where
    the shipped CRDs were not generated from (`make crds` generates them from the registry) keeps its source, which
    its model then parses."""
    schema = crd_schema(kind)
    policy = ((schema or {}).get("properties", {}).get("spec", {}).get("properties", {})).get("mlPolicy")
    known = (policy or {}).get("properties", {})
    missing = [name for name in ml_sources if name not in known]
    if schema is None or policy is None or not missing:
        return schema
    kept = {name: {"type": "object", "x-kubernetes-preserve-unknown-fields": True} for name in missing}
    extended = {**policy, "properties": {**known, **kept}}
    spec = schema["properties"]["spec"]
    return {
        **schema,
        "properties": {
            **schema["properties"],
            "spec": {**spec, "properties": {**spec["properties"], "mlPolicy": extended}},
        },
    }


def pruned(
    doc: Document, warnings: list[str], unknown_fields: str, framework: Framework | None = None
) -> tuple[dict[str, Any], FieldError | None]:
    """The object as the API server would store it, and the API server's refusal when it has fields the schema does
    not know and `unknown_fields` is "strict" (kubectl's default); with "warn" each dropped field is named in a
    warning instead, with "ignore" nowhere. `framework`: whose `mlPolicy` sources a runtime's schema knows (None: a
    TrainJob's, whose schema no plugin extends)."""
    kind = str(doc.raw.get("kind"))
    schema = crd_schema(kind) if framework is None else runtime_schema(kind, framework.one_ml_policy_sources())
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
    return check_trainjobs(
        inputs.trainjobs, check_runtimes(inputs, framework, unknown_fields), framework, unknown_fields
    )


@contextlib.contextmanager
def _checking() -> Iterator[None]:
    """A crash of the checks on some input becomes a clear error, never a traceback."""
    try:
        yield
    except UsageError:
        raise
    except Exception as err:
        raise UsageError(f"cannot check the input: {describe(err)}") from err


def check_runtimes(inputs: Inputs, framework: Framework, unknown_fields: str = "strict") -> Checked:
    """The runtimes' checks, parsed with `framework`'s models (`Framework.runtime_models`): their catalog for the
    TrainJobs, and what is wrong with them (`check`)."""
    with _checking():
        return _check_runtimes(inputs, framework, unknown_fields)


def check_trainjobs(
    trainjobs: Sequence[Document], runtimes: Checked, framework: Framework, unknown_fields: str = "strict"
) -> Checked:
    """The TrainJobs' checks (`check`), after what `check_runtimes` found, which the result goes on from."""
    with _checking():
        return _check_trainjobs(trainjobs, runtimes, framework, unknown_fields)


def _check_runtimes(inputs: Inputs, framework: Framework, unknown_fields: str) -> Checked:
    catalog = RuntimeCatalog()
    errors: list[tuple[Document, list[FieldError]]] = []
    warnings: list[str] = []
    for doc in inputs.runtimes:
        raw, refused = pruned(doc, warnings, unknown_fields, framework)
        if refused is not None:  # the API server stops there: nothing else is checked
            catalog.add_invalid(doc.raw)
            errors.append((doc, [refused]))
            continue
        runtime, result = check_runtime(raw, framework)
        problems = list(result.errors)
        if runtime is not None:
            admission = review_runtime(runtime, reported=result.errors)
            problems += admission.errors
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
        stored = runtimes.old.get(name_key(doc.raw))
        job, result = check_trainjob(raw, stored.raw if stored is not None else None)
        problems = list(result.errors)
        old_job = parse(TrainJob, stored.raw)[0] if stored is not None else None
        if job is not None:
            key = runtime_key(job)
            runtime = catalog.get(key) if key is not None else None
            if key is not None and runtime is None:
                if catalog.is_invalid(key):
                    problems.append(
                        invalid(
                            "spec.runtimeRef",
                            job.spec.runtime_ref.to_wire(),
                            f"{key} is invalid (its errors are listed above): the API server would not have stored it",
                        )
                    )
                    errors.append((doc, problems))
                else:
                    unusable.append(f"{doc.label}: runtime {key} not found in the -r files")
                    if problems:
                        errors.append((doc, problems))
                continue
            info = reusable_info(job, runtime)
            admission = review_trainjob(framework, old_job, job, runtime, info=info)
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
