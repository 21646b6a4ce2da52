"""Validation equal to the CRD schemas and CEL rules plus the admission webhooks (docs/upstream-behaviour.md#webhooks).

Every function returns field errors with upstream's paths and messages; the webhooks and the CLI share them.
"""

import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..api import constants as c
from ..api import rules
from ..api.runtime import ClusterTrainingRuntime, TrainingRuntime
from ..api.trainjob import TrainJob
from . import names
from .errors import ErrorType, FieldError, Validation, forbidden, invalid, invalid_rule, plain, required
from .info import RuntimeSource
from .observed import NOTHING, Observed
from .pipeline import Framework
from .quantity import QuantityError, parse_quantity

M = TypeVar("M", bound=BaseModel)

_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
SUPPORTED_KINDS = (c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND)


def _path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in ("function-after", "union") or "[" in str(part):
            continue
        else:
            text += f".{part}" if text else str(part)
    return text


def _schema_error(error: Any) -> FieldError:
    """A pydantic error in the words the API server uses for the same schema violation."""
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and ("[" in p or p in ("str", "int", "float"))))
    path, kind, ctx, value = _path(loc), error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "missing":
        return required(path)
    if kind in ("greater_than_equal", "greater_than"):
        return invalid(path, value, f"{path} in body should be greater than or equal to {ctx.get('ge', ctx.get('gt'))}")
    if kind in ("less_than_equal", "less_than"):
        return invalid(path, value, f"{path} in body should be less than or equal to {ctx.get('le', ctx.get('lt'))}")
    if kind == "string_too_long":
        return FieldError(path, ErrorType.TOO_LONG, f"may not be more than {ctx.get('max_length')} bytes")
    if kind == "string_too_short":
        return invalid(path, value, f"{path} in body should be at least {ctx.get('min_length')} chars long")
    if kind == "too_long":
        return FieldError(path, ErrorType.TOO_MANY, f"{ctx.get('actual_length')}: must have at most "
                                                    f"{ctx.get('max_length')} items")
    if kind == "too_short":
        size = len(value) if isinstance(value, list | dict) else value
        return invalid(path, size, f"{path} in body should have at least {ctx.get('min_length')} items")
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", '"').replace(" or ", ", ")
        return FieldError(path, ErrorType.NOT_SUPPORTED, f"supported values: {expected}", value)
    type_names = {"int_type": "integer", "string_type": "string", "bool_type": "boolean", "list_type": "array",
                  "dict_type": "object", "model_type": "object", "float_type": "number", "int_from_float": "integer"}
    if kind in type_names:
        return invalid(path, _json_type(value), f"{path} in body must be of type {type_names[kind]}: "
                                                f'"{_json_type(value)}"')
    return invalid(path, value, error.get("msg", "invalid"))


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "object"


# Schema errors after which the API server does not evaluate CEL rules (it says so in one extra error).
_CEL_BLOCKING = ("missing", "literal_error", "string_too_long", "too_long", "_type", "_parsing", "int_from_float")
CEL_SKIPPED = FieldError("<nil>", ErrorType.INVALID, "some validation rules were not checked because the object "
                         "was invalid; correct the existing errors to complete validation", None)


def _blocks_cel(kind: str) -> bool:
    return any(kind == k or (k.startswith("_") and kind.endswith(k)) for k in _CEL_BLOCKING)


def schema_errors(model: type[M], raw: Any) -> tuple[M | None, list[FieldError], bool]:
    """The typed object or the schema errors, and whether those errors keep CEL rules from running."""
    if not isinstance(raw, dict):
        return None, [invalid("<root>", _json_type(raw), "the object must be a mapping")], True
    try:
        return model.model_validate(raw), [], False
    except ValidationError as err:
        unique: dict[str, FieldError] = {}
        blocking = False
        for e in err.errors():
            fe = _schema_error(e)
            unique.setdefault(str(fe), fe)
            blocking = blocking or _blocks_cel(e["type"])
        return None, list(unique.values()), blocking


def parse(model: type[M], raw: Any) -> tuple[M | None, list[FieldError]]:
    """The typed object, or the schema errors that stop the API server from storing it."""
    parsed, errors, _ = schema_errors(model, raw)
    return parsed, errors


def object_name_errors(raw: dict[str, Any]) -> list[FieldError]:
    """The API server's own check of a custom resource's name (a DNS-1123 subdomain)."""
    name = _get(raw, "metadata", "name")
    if isinstance(name, str) and name and not names.is_dns1123_subdomain(name):
        return [invalid("metadata.name", name, names.DNS1123_SUBDOMAIN_MESSAGE)]
    return []


# --- CRD-level CEL rules ---------------------------------------------------------------------------

def _get(raw: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(raw, dict):
            return None
        raw = raw.get(key)
    return raw


def trainjob_cel(raw: dict[str, Any]) -> list[FieldError]:
    """The TrainJob CRD's CEL rules, evaluated on the raw object so they report beside schema errors."""
    errors: list[FieldError] = []
    name = _get(raw, "metadata", "name")
    if isinstance(name, str):
        if not _NAME.match(name):
            errors.append(invalid_rule("<nil>", rules.NAME_RFC1035.message))
        if len(name) > 63:
            errors.append(invalid_rule("<nil>", rules.NAME_MAX_63.message))
    for kind in ("dataset", "model"):
        uri = _get(raw, "spec", "initializer", kind, "storageUri")
        if isinstance(uri, str) and uri != "" and not _URI.match(uri):
            errors.append(invalid(f"spec.initializer.{kind}.storageUri", uri, rules.STORAGE_URI.message))
    num_proc = _get(raw, "spec", "trainer", "numProcPerNode")
    if isinstance(num_proc, int) and not isinstance(num_proc, bool) and num_proc < 1:
        errors.append(invalid("spec.trainer.numProcPerNode", num_proc, rules.NUM_PROC_PER_NODE.message))
    managed_by = _get(raw, "spec", "managedBy")
    if isinstance(managed_by, str) and managed_by not in (c.DEFAULT_MANAGED_BY, c.MULTIKUEUE_MANAGED_BY):
        errors.append(invalid("spec.managedBy", managed_by, rules.MANAGED_BY.message))
    patches = _get(raw, "spec", "runtimePatches")
    managers = [p.get("manager") for p in patches if isinstance(p, dict)] if isinstance(patches, list) else []
    for i, manager in enumerate(managers):
        if manager is not None and manager in managers[:i]:
            errors.append(FieldError(f"spec.runtimePatches[{i}]", ErrorType.DUPLICATE, "", {"manager": manager}))
    trainer_status = _get(raw, "status", "trainerStatus")
    if isinstance(trainer_status, dict) and "lastUpdatedTime" not in trainer_status:
        errors.append(invalid_rule("status", rules.TRAINER_STATUS_TIME.message))
    return errors


def ml_policy_cel(raw: dict[str, Any]) -> list[FieldError]:
    """The runtime CRD's CEL rules on `spec.mlPolicy`, evaluated on the raw object."""
    policy = _get(raw, "spec", "mlPolicy")
    if not isinstance(policy, dict):
        return []
    errors: list[FieldError] = []
    if sum(key in policy for key in ("torch", "mpi", "jax", "xgboost", "flux")) > 1:
        errors.append(invalid_rule("spec.mlPolicy", rules.ONE_ML_POLICY.message))
    targets = _get(policy, "torch", "envInjection", "targets")
    for i, target in enumerate(targets if isinstance(targets, list) else []):
        names = target.get("containerNames") if isinstance(target, dict) else None
        if isinstance(names, list) and c.NODE in names:
            errors.append(invalid_rule(f"spec.mlPolicy.torch.envInjection.targets[{i}].containerNames",
                                       rules.ENV_INJECTION_NOT_NODE.message))
    for source, rule in (("mpi", rules.MPI_NUM_PROC_PER_NODE), ("flux", rules.FLUX_NUM_PROC_PER_NODE)):
        value = _get(policy, source, "numProcPerNode")
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            errors.append(invalid(f"spec.mlPolicy.{source}.numProcPerNode", value, rule.message))
    return errors


def replicated_job_name_errors(names_by_index: list[tuple[int, Any]]) -> list[FieldError]:
    """v2.4's bound on a runtime's replicated job names (#4394), with the CRD rule's path and message."""
    return [invalid(f"spec.template.spec.replicatedJobs[{i}].name", name, rules.REPLICATED_JOB_NAME_MAX_20.message)
            for i, name in names_by_index
            if isinstance(name, str) and len(name) > rules.REPLICATED_JOB_NAME_MAX_LENGTH]


def runtime_cel(raw: dict[str, Any]) -> list[FieldError]:
    """The runtime CRD's CEL rules, evaluated on the raw object."""
    jobs = _get(raw, "spec", "template", "spec", "replicatedJobs")
    named = [(i, j.get("name")) for i, j in enumerate(jobs if isinstance(jobs, list) else []) if isinstance(j, dict)]
    return ml_policy_cel(raw) + replicated_job_name_errors(named)


IMMUTABLE_SPEC_FIELDS = ("runtimeRef", "initializer", "trainer", "activeDeadlineSeconds", "managedBy",
                         "startupDeadlineSeconds")
IMMUTABLE_POD_PATCH_FIELDS = ("serviceAccountName", "volumes", "initContainers", "containers", "imagePullSecrets",
                              "securityContext", "terminationGracePeriodSeconds")


def _immutable(path: str, before: Any, after: Any) -> list[FieldError]:
    """`self == oldSelf`: evaluated only when the value exists on both sides; scalars show the new value."""
    if before is None or after is None or before == after:
        return []
    if isinstance(after, dict | list):
        return [invalid_rule(path, rules.IMMUTABLE.message)]
    return [invalid(path, after, rules.IMMUTABLE.message)]


def _resize_while_suspended(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> bool:
    """rules.RESIZE_WHILE_SUSPENDED: the stored TrainJob is suspended and only the resizable trainer fields
    changed."""
    old_trainer, new_trainer = old_spec.get("trainer"), new_spec.get("trainer")
    if old_spec.get("suspend") is not True or not isinstance(old_trainer, dict) or not isinstance(new_trainer, dict):
        return False
    return all(old_trainer.get(f) == new_trainer.get(f) for f in rules.FIXED_TRAINER_FIELDS)


def _by_key(items: Any, key: str) -> dict[Any, tuple[int, dict[str, Any]]]:
    return {item.get(key): (i, item) for i, item in enumerate(items if isinstance(items, list) else [])
            if isinstance(item, dict)}


def trainjob_transition(old_raw: dict[str, Any], new_raw: dict[str, Any]) -> list[FieldError]:
    """CEL transition rules of an UPDATE; list-map entries are correlated by their keys, as the API server does."""
    errors: list[FieldError] = []
    old_spec, new_spec = _get(old_raw, "spec") or {}, _get(new_raw, "spec") or {}
    for name in IMMUTABLE_SPEC_FIELDS:
        if name == "trainer" and _resize_while_suspended(old_spec, new_spec):
            continue
        errors += _immutable(f"spec.{name}", old_spec.get(name), new_spec.get(name))
    old_patches = _by_key(old_spec.get("runtimePatches"), "manager")
    for i, patch in _by_key(new_spec.get("runtimePatches"), "manager").values():
        if patch.get("manager") not in old_patches:
            continue
        previous = old_patches[patch["manager"]][1]
        jobs_path = ("trainingRuntimeSpec", "template", "spec", "replicatedJobs")
        old_jobs = _by_key(_get(previous, *jobs_path), "name")
        for j, rjob in _by_key(_get(patch, *jobs_path), "name").values():
            if rjob.get("name") not in old_jobs:
                continue
            before = _get(old_jobs[rjob["name"]][1], "template", "spec", "template", "spec") or {}
            after = _get(rjob, "template", "spec", "template", "spec") or {}
            prefix = (f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
                      ".template.spec.template.spec")
            for name in IMMUTABLE_POD_PATCH_FIELDS:
                errors += _immutable(f"{prefix}.{name}", before.get(name), after.get(name))
    return errors


# --- admission (webhooks) ---------------------------------------------------------------------------

RuntimeLookup = Callable[[str, str, str], RuntimeSource | None]
"""(kind, namespace, name) → the runtime, or None when it does not exist."""


def admit_trainjob(framework: Framework, old: TrainJob | None, new: TrainJob, lookup: RuntimeLookup,
                   observed: Observed = NOTHING) -> Validation:
    """The TrainJob validating webhook (docs/upstream-behaviour.md#webhooks): runtime kind and existence,
    deprecation, plugin checks."""
    ref = new.spec.runtime_ref
    if ref.api_group != c.GROUP or ref.kind not in SUPPORTED_KINDS:
        return Validation((plain(f"unsupported runtime: {ref.kind}.{ref.api_group}"),))
    runtime = lookup(ref.kind, new.namespace, ref.name)
    if runtime is None:
        if ref.kind == c.TRAINING_RUNTIME_KIND:
            # controller-runtime's cached client names the Kind in its NotFound error, not the resource.
            detail = (f'TrainingRuntime.trainer.kubeflow.org "{ref.name}" not found: specified trainingRuntime '
                      "must be created before the TrainJob is created")
            return Validation((invalid("spec.runtimeRef", ref.to_wire(), detail),))
        detail = (f'ClusterTrainingRuntime.trainer.kubeflow.org "{ref.name}" not found: specified '
                  "clusterTrainingRuntime must be created before the TrainJob is created")
        return Validation((invalid("spec.RuntimeRef", ref.to_wire(), detail),))
    warnings: tuple[str, ...] = ()
    if runtime.kind == c.CLUSTER_TRAINING_RUNTIME_KIND and runtime.deprecated:
        warnings = (f'Referenced ClusterTrainingRuntime "{runtime.name}" is deprecated and will be removed in a '
                    f"future release of Kubeflow Trainer. See runtime deprecation policy: "
                    f"{c.RUNTIME_DEPRECATION_POLICY_URL}",)
    return Validation(warnings=warnings) + framework.validate(old, new, runtime, observed)


def run_policy_errors(runtime: TrainingRuntime | ClusterTrainingRuntime) -> list[FieldError]:
    """With a `runPolicy`, cleanup belongs to the TrainJob (upstream T#4052): the JobSet template must not carry its
    own TTL, which would delete the JobSet under a TrainJob that is kept."""
    policy, template = runtime.spec.run_policy, runtime.spec.template.spec
    if policy is None or template.ttl_seconds_after_finished is None:
        return []
    return [invalid("spec.template.spec.ttlSecondsAfterFinished", template.ttl_seconds_after_finished,
                    "must not be set when spec.runPolicy is set: use spec.runPolicy.ttlSecondsAfterFinished, which "
                    "deletes the TrainJob with its JobSet")]


def admit_runtime(runtime: TrainingRuntime | ClusterTrainingRuntime) -> Validation:
    """The runtime validating webhooks (docs/upstream-behaviour.md#webhooks): ancestor jobs have one replica and the
    required container."""
    replicated_jobs = runtime.spec.template.spec.replicated_jobs
    # The CRD carries the same rule; the webhook repeats it for runtimes stored before v2.4's CRD was installed.
    errors: list[FieldError] = replicated_job_name_errors([(i, rj.name) for i, rj in enumerate(replicated_jobs)])
    for i, rjob in enumerate(replicated_jobs):
        labels = rjob.template.metadata.labels if rjob.template.metadata is not None else None
        ancestor = (labels or {}).get(c.ANCESTOR_LABEL)
        if ancestor not in c.ANCESTOR_CONTAINERS:
            continue
        path = f"spec.template.spec.replicatedJobs[{i}]"
        if (rjob.replicas if rjob.replicas is not None else 1) != 1:
            errors.append(invalid(f"{path}.replicas", rjob.replicas, "always must be 1"))
        pod = rjob.template.spec.template.spec
        containers = [ct.to_wire() for ct in pod.containers] if pod is not None else []
        if c.ANCESTOR_CONTAINERS[ancestor] not in [ct["name"] for ct in containers]:
            errors.append(invalid(f"{path}.template.spec.template.spec.containers",
                                  [names.go_container(ct) for ct in containers],
                                  f"must contain the required container for the ancestor: {ancestor}"))
    errors += run_policy_errors(runtime)
    warnings: tuple[str, ...] = ()
    if runtime.kind == c.CLUSTER_TRAINING_RUNTIME_KIND and \
            (runtime.metadata.labels or {}).get(c.SUPPORT_LABEL) == c.SUPPORT_DEPRECATED:
        warnings = (f'ClusterTrainingRuntime "{runtime.metadata.name}" is deprecated and will be removed in a '
                    f"future release of Kubeflow Trainer. See runtime deprecation policy: "
                    f"{c.RUNTIME_DEPRECATION_POLICY_URL}",)
    return Validation(tuple(errors), warnings)


# --- whole-object entry points (CLI, webhooks) -------------------------------------------------------

_QUANTITY = re.compile(r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
                       r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
_QUANTITY_MAPS = {("resources", "requests"), ("resources", "limits"), ("resourcesPerNode", "requests"),
                  ("resourcesPerNode", "limits")}


def quantity_errors(raw: Any, path: str = "", parent: str = "", depth: int = 0) -> list[FieldError]:
    """The CRD's Quantity pattern (and int64 range) on every resources map: what the API server refuses before any
    plugin computes with the values."""
    errors: list[FieldError] = []
    if depth > 60:
        return errors
    if isinstance(raw, dict):
        for key, value in raw.items():
            where = f"{path}.{key}" if path else str(key)
            if ((parent, key) in _QUANTITY_MAPS or key == "overhead") and isinstance(value, dict):
                for name, quantity in value.items():
                    errors += _quantity_error(f"{where}.{name}", quantity)
            else:
                errors += quantity_errors(value, where, str(key), depth + 1)
    elif isinstance(raw, list):
        for index, value in enumerate(raw):
            errors += quantity_errors(value, f"{path}[{index}]", parent, depth + 1)
    return errors


def _quantity_error(path: str, value: Any) -> list[FieldError]:
    if isinstance(value, str):
        if not _QUANTITY.match(value):
            return [invalid(path, value, f"{path} in body should match '{_QUANTITY.pattern}'")]
        try:
            parse_quantity(value)
        except QuantityError:
            return [invalid(path, value, "out of range")]
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return [invalid(path, value, "must be a 64-bit integer")]
    if isinstance(value, float) and not math.isfinite(value):
        return [invalid(path, str(value), "must be a finite number")]
    return []


def check_trainjob(raw: Any, old_raw: Any | None = None) -> tuple[TrainJob | None, Validation]:
    """Schema + CEL (+ transition rules when `old_raw` is given): what the API server enforces."""
    job, schema, blocking = schema_errors(TrainJob, raw)
    errors = (object_name_errors(raw) if isinstance(raw, dict) else []) + schema
    if blocking:
        return job, Validation((*errors, CEL_SKIPPED))
    if isinstance(raw, dict):
        errors += quantity_errors(raw.get("spec"), "spec")
        errors += trainjob_cel(raw)
        old = parse(TrainJob, old_raw)[0] if isinstance(old_raw, dict) else None
        if old is not None and job is not None:  # compare as stored: with the CRD defaults applied
            errors += trainjob_transition(old.to_wire(), job.to_wire())
    return job, Validation(tuple(errors))


def check_runtime(raw: Any) -> tuple[TrainingRuntime | ClusterTrainingRuntime | None, Validation]:
    kind = raw.get("kind") if isinstance(raw, dict) else None
    model: type[TrainingRuntime] | type[ClusterTrainingRuntime] = (
        TrainingRuntime if kind == c.TRAINING_RUNTIME_KIND else ClusterTrainingRuntime
    )
    runtime, schema, blocking = schema_errors(model, raw)
    errors = (object_name_errors(raw) if isinstance(raw, dict) else []) + schema
    if blocking:
        return runtime, Validation((*errors, CEL_SKIPPED))
    if isinstance(raw, dict):
        errors += quantity_errors(raw.get("spec"), "spec")
        errors += runtime_cel(raw)
    return runtime, Validation(tuple(errors))


__all__ = [
    "admit_runtime",
    "admit_trainjob",
    "check_runtime",
    "check_trainjob",
    "forbidden",
    "ml_policy_cel",
    "parse",
    "replicated_job_name_errors",
    "runtime_cel",
    "schema_errors",
    "trainjob_cel",
    "trainjob_transition",
]
