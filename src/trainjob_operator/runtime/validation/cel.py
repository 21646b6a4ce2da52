"""The CRDs' CEL rules (`api.rules`), evaluated offline on the raw object so they report beside schema errors, with the
API server's paths and messages. `TWINS` names the function mirroring each rule of the CRDs, or why none does;
tests/unit/runtime/validation/test_cel_twins.py fails when a CRD rule is in neither. (Why not a CEL library: docs/validation.md.)"""

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ...api import constants as c
from ...api import rules
from ...api.rules import CelRule
from ..errors import ErrorType, FieldError, invalid, invalid_rule

_NAME = re.compile(rules.RFC1035_LABEL_PATTERN)
_URI = re.compile(rules.URI_PATTERN)


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
    errors += _elastic_bounds(_get(raw, "spec", "trainer", "elasticPolicy"), "spec.trainer.elasticPolicy")
    managed_by = _get(raw, "spec", "managedBy")
    if isinstance(managed_by, str) and managed_by not in rules.MANAGED_BY_VALUES:
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


def _elastic_bounds(policy: Any, path: str) -> list[FieldError]:
    """rules.ELASTIC_MIN_LE_MAX on a runtime's or a TrainJob's elasticPolicy."""
    if not isinstance(policy, dict):
        return []
    low, high = policy.get("minNodes"), policy.get("maxNodes")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        return [invalid_rule(path, rules.ELASTIC_MIN_LE_MAX.message)]
    return []


def ml_policy_cel(raw: dict[str, Any], sources: Sequence[str] = rules.ML_POLICIES) -> list[FieldError]:
    """The runtime CRD's CEL rules on `spec.mlPolicy`, evaluated on the raw object (`sources`: the wire names of the
    framework sources, of which at most one may be set)."""
    policy = _get(raw, "spec", "mlPolicy")
    if not isinstance(policy, dict):
        return []
    errors: list[FieldError] = []
    if sum(key in policy for key in sources) > 1:
        errors.append(invalid_rule("spec.mlPolicy", rules.ONE_ML_POLICY.message))
    targets = _get(policy, "torch", "envInjection", "targets")
    for i, target in enumerate(targets if isinstance(targets, list) else []):
        names = target.get("containerNames") if isinstance(target, dict) else None
        if isinstance(names, list) and c.NODE in names:
            errors.append(
                invalid_rule(
                    f"spec.mlPolicy.torch.envInjection.targets[{i}].containerNames",
                    rules.ENV_INJECTION_NOT_NODE.message,
                )
            )
    errors += _elastic_bounds(_get(policy, "torch", "elasticPolicy"), "spec.mlPolicy.torch.elasticPolicy")
    for source, rule in (("mpi", rules.MPI_NUM_PROC_PER_NODE), ("flux", rules.FLUX_NUM_PROC_PER_NODE)):
        value = _get(policy, source, "numProcPerNode")
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            errors.append(invalid(f"spec.mlPolicy.{source}.numProcPerNode", value, rule.message))
    return errors


def replicated_job_name_errors(names_by_index: list[tuple[int, Any]]) -> list[FieldError]:
    """v2.4's bound on a runtime's replicated job names (#4394), with the CRD rule's path and message."""
    return [
        invalid(f"spec.template.spec.replicatedJobs[{i}].name", name, rules.REPLICATED_JOB_NAME_MAX_20.message)
        for i, name in names_by_index
        if isinstance(name, str) and len(name) > rules.REPLICATED_JOB_NAME_MAX_LENGTH
    ]


def runtime_cel(raw: dict[str, Any], ml_sources: Sequence[str] = rules.ML_POLICIES) -> list[FieldError]:
    """The runtime CRD's CEL rules, evaluated on the raw object (`ml_sources`: as for `ml_policy_cel`)."""
    jobs = _get(raw, "spec", "template", "spec", "replicatedJobs")
    named = [(i, j.get("name")) for i, j in enumerate(jobs if isinstance(jobs, list) else []) if isinstance(j, dict)]
    return ml_policy_cel(raw, ml_sources) + replicated_job_name_errors(named)


IMMUTABLE_SPEC_FIELDS = (
    "runtimeRef",
    "initializer",
    "trainer",
    "activeDeadlineSeconds",
    "managedBy",
    "startupDeadlineSeconds",
)
IMMUTABLE_POD_PATCH_FIELDS = (
    "serviceAccountName",
    "volumes",
    "initContainers",
    "containers",
    "imagePullSecrets",
    "securityContext",
    "terminationGracePeriodSeconds",
)


def _immutable(path: str, before: Any, after: Any) -> list[FieldError]:
    """`self == oldSelf`: evaluated only when the value exists on both sides; scalars show the new value."""
    if before is None or after is None or before == after:
        return []
    if isinstance(after, dict | list):
        return [invalid_rule(path, rules.IMMUTABLE.message)]
    return [invalid(path, after, rules.IMMUTABLE.message)]


def _resize_while_suspended(old_spec: dict[str, Any], new_spec: dict[str, Any]) -> bool:
    """rules.RESIZE_WHILE_SUSPENDED: the stored TrainJob is suspended and only the resizable trainer fields
    changed, or its trainer is elastic and only numNodes changed."""
    old_trainer, new_trainer = old_spec.get("trainer"), new_spec.get("trainer")
    if not isinstance(old_trainer, dict) or not isinstance(new_trainer, dict):
        return False
    if old_spec.get("suspend") is True and all(
        old_trainer.get(f) == new_trainer.get(f) for f in rules.FIXED_TRAINER_FIELDS
    ):
        return True
    # An elastic trainer: only numNodes changed (docs/elastic.md).
    fixed = (*rules.FIXED_TRAINER_FIELDS, "resourcesPerNode")
    return "elasticPolicy" in old_trainer and all(old_trainer.get(f) == new_trainer.get(f) for f in fixed)


def _by_key(items: Any, key: str) -> dict[Any, tuple[int, dict[str, Any]]]:
    return {
        item.get(key): (i, item)
        for i, item in enumerate(items if isinstance(items, list) else [])
        if isinstance(item, dict)
    }


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
            prefix = (
                f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
                ".template.spec.template.spec"
            )
            for name in IMMUTABLE_POD_PATCH_FIELDS:
                errors += _immutable(f"{prefix}.{name}", before.get(name), after.get(name))
    return errors


#: Every CEL rule of the CRDs → the function here that mirrors it (with its path and message), or None with the reason
#: in `UNMIRRORED`. tests/unit/runtime/validation/test_cel_twins.py fails for a rule of the CRDs that is in neither.
TWINS: Final[Mapping[CelRule, Callable[..., list[FieldError]] | None]] = {
    rules.NAME_RFC1035: trainjob_cel,
    rules.NAME_MAX_63: trainjob_cel,
    rules.STORAGE_URI: trainjob_cel,
    rules.NUM_PROC_PER_NODE: trainjob_cel,
    rules.MANAGED_BY: trainjob_cel,
    rules.TRAINER_STATUS_TIME: trainjob_cel,
    rules.IMMUTABLE: trainjob_transition,
    rules.RESIZE_WHILE_SUSPENDED: trainjob_transition,
    rules.ONE_ML_POLICY: ml_policy_cel,
    rules.ENV_INJECTION_NOT_NODE: ml_policy_cel,
    rules.ELASTIC_MIN_LE_MAX: ml_policy_cel,
    rules.MPI_NUM_PROC_PER_NODE: ml_policy_cel,
    rules.FLUX_NUM_PROC_PER_NODE: ml_policy_cel,
    rules.REPLICATED_JOB_NAME_MAX_20: replicated_job_name_errors,
    rules.JOBSET_IMMUTABLE: None,
    rules.JOBSET_STARTUP_XOR_DEPENDS_ON: None,
    rules.JOBSET_VCP_NO_NAMESPACE: None,
}
UNMIRRORED: Final[Mapping[CelRule, str]] = {
    rules.JOBSET_IMMUTABLE: "a transition rule of runtime UPDATEs; offline validation checks runtimes as created",
    rules.JOBSET_STARTUP_XOR_DEPENDS_ON: "JobSet's rule on the embedded JobSet spec: the API server enforces it when "
    "the runtime is stored, offline `validate` does not check it (a known gap, kept as it was)",
    rules.JOBSET_VCP_NO_NAMESPACE: "JobSet's rule on the embedded JobSet spec (as above)",
}
