"""`convert`: older shapes (proposal-era `kubeflow.org/v2alpha1`, early v1alpha1) rewritten as the served one."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..api import constants as c
from ..api.legacy import (
    RuntimeChoice,
    choose_runtime,
    convert,
    initializer_hint,
    initializers_of,
    legacy_shape,
    with_runtime,
)
from ..runtime.errors import render_value
from ..runtime.pipeline import Framework
from .check import check
from .inputs import PROG, Document, load_documents, read_inputs
from .outcome import Outcome, outcome


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
