"""Validation equal to the CRD schemas and CEL rules plus the admission webhooks (docs/upstream-behaviour.md#webhooks).

Every function returns field errors with upstream's paths and messages; the webhooks and the CLI share them.
`schema`: the structural schema; `cel`: the CEL rules; `admission`: the webhooks' own checks. `check_trainjob` and
`check_runtime` are what the API server enforces on a whole object (schema, then CEL unless a schema error stops it).
"""

from typing import Any

from ...api.runtime import ClusterTrainingRuntime, TrainingRuntime, runtime_model
from ...api.trainjob import TrainJob
from ..errors import ErrorType, FieldError, Validation
from ..pipeline import Framework
from .admission import admit_runtime, admit_trainjob
from .cel import runtime_cel, trainjob_cel, trainjob_transition
from .schema import CEL_SKIPPED, object_name_errors, parse, quantity_errors, schema_errors


def check_trainjob(raw: Any, old_raw: Any | None = None) -> tuple[TrainJob | None, Validation]:
    """Schema + CEL (+ transition rules when `old_raw` is given): what the API server enforces."""
    job, schema, blocking = schema_errors(TrainJob, raw)
    names = object_name_errors(raw) if isinstance(raw, dict) else []
    errors = names + schema
    if blocking or _blocks_cel(names):
        return job, Validation((*errors, CEL_SKIPPED))
    if isinstance(raw, dict):
        errors += quantity_errors(raw.get("spec"), "spec")
        errors += trainjob_cel(raw)
        old = parse(TrainJob, old_raw)[0] if isinstance(old_raw, dict) else None
        if old is not None and job is not None:  # compare as stored: with the CRD defaults applied
            errors += trainjob_transition(old.to_wire(), job.to_wire())
    return job, Validation(tuple(errors))


def check_runtime(
    raw: Any, framework: Framework | None = None
) -> tuple[TrainingRuntime | ClusterTrainingRuntime | None, Validation]:
    """Schema + CEL of a runtime with `framework`'s models and one-of rule (`Framework.runtime_models`: its plugins'
    `mlPolicy` sources; None: the shipped API's)."""
    kind = raw.get("kind") if isinstance(raw, dict) else None
    model = framework.runtime_model(kind) if framework is not None else runtime_model(kind)
    runtime, schema, blocking = schema_errors(model, raw)
    names = object_name_errors(raw) if isinstance(raw, dict) else []
    errors = names + schema
    if blocking or _blocks_cel(names):
        return runtime, Validation((*errors, CEL_SKIPPED))
    if isinstance(raw, dict):
        errors += quantity_errors(raw.get("spec"), "spec")
        errors += runtime_cel(raw, framework.one_ml_policy_sources()) if framework is not None else runtime_cel(raw)
    return runtime, Validation(tuple(errors))


def _blocks_cel(errors: list[FieldError]) -> bool:
    """A missing name is a Required error: the API server then skips the CEL rules, as for a schema error."""
    return any(error.type is ErrorType.REQUIRED for error in errors)


__all__ = ["admit_runtime", "admit_trainjob", "check_runtime", "check_trainjob", "parse"]
