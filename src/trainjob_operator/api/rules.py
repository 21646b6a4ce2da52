"""CEL validation rules of our CRDs: written once, emitted into the CRDs and mirrored in `runtime.validation.cel`.

Every rule the CRDs carry is a constant here; `runtime.validation.cel.TWINS` names the offline twin of each (or why it
has none) and tests/unit/runtime/validation/test_cel_twins.py fails when a rule has neither. The regular expressions and value lists the
rules and their twins share are constants here too.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from . import constants as c


@dataclass(frozen=True)
class CelRule:
    rule: str
    message: str
    field_path: str | None = None
    """Where the API server reports a failure of a rule set on an enclosing object (e.g. `.trainer`)."""

    def wire(self) -> dict[str, str]:
        wired = {"rule": self.rule, "message": self.message}
        if self.field_path is not None:
            wired["fieldPath"] = self.field_path
        return wired


def x_validations(*rules: CelRule) -> dict[str, Any]:
    """`json_schema_extra` for a field or model carrying CEL rules."""
    return {"x-kubernetes-validations": [r.wire() for r in rules]}


IMMUTABLE: Final = CelRule("self == oldSelf", "field is immutable")
# `spec.trainer` is immutable, as upstream's, except `numNodes` and `resourcesPerNode` when the stored TrainJob is
# suspended (upstream T#3995): the rule sits on the spec because it reads `suspend`, and reports on `.trainer` with
# the message of the plain rule. Only evaluated, like upstream's, when both the old and the new spec have a trainer.
RESIZABLE_TRAINER_FIELDS: Final = ("numNodes", "resourcesPerNode")
FIXED_TRAINER_FIELDS: Final = ("image", "command", "args", "env", "numProcPerNode", "elasticPolicy")


def _same(field: str) -> str:
    new, old = f"self.trainer.{field}", f"oldSelf.trainer.{field}"
    return f"(has({new}) == has({old}) && (!has({new}) || {new} == {old}))"


# Beyond upstream (elastic PyTorch, docs/elastic.md): a trainer with an elasticPolicy may change its numNodes at any
# time (the operator resizes the running job; the webhook keeps it within the bounds).
RESIZE_WHILE_SUSPENDED: Final = CelRule(
    "!has(self.trainer) || !has(oldSelf.trainer) || self.trainer == oldSelf.trainer || "
    "(has(oldSelf.suspend) && oldSelf.suspend && " + " && ".join(_same(f) for f in FIXED_TRAINER_FIELDS) + ") || "
    "(has(oldSelf.trainer.elasticPolicy) && "
    + " && ".join(_same(f) for f in (*FIXED_TRAINER_FIELDS, "resourcesPerNode"))
    + ")",
    IMMUTABLE.message,
    ".trainer",
)
#: An RFC 1035 DNS label (CEL's `matches` is RE2; this pattern means the same in Python's `re`).
RFC1035_LABEL_PATTERN: Final = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
#: `scheme://...` of a storage URI.
URI_PATTERN: Final = "^[A-Za-z][A-Za-z0-9+.-]*://.+$"
#: The values of `spec.managedBy`.
MANAGED_BY_VALUES: Final = (c.DEFAULT_MANAGED_BY, c.MULTIKUEUE_MANAGED_BY)
#: The Kubernetes resource.Quantity format (the CRD's `pattern` of every Quantity).
QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
#: The ML policies of a runtime, of which at most one may be set.
ML_POLICIES: Final = ("torch", "mpi", "jax", "xgboost", "flux")

NAME_RFC1035: Final = CelRule(
    f"self.metadata.name.matches('{RFC1035_LABEL_PATTERN}')",
    "metadata.name must match RFC 1035 DNS label format",
)
NAME_MAX_63: Final = CelRule("size(self.metadata.name) <= 63", "metadata.name must be no more than 63 characters")
STORAGE_URI: Final = CelRule(
    f"self == '' || self.matches('{URI_PATTERN}')",
    "storageUri may be empty, or it must be a valid URI (scheme://...)",
)
NUM_PROC_PER_NODE: Final = CelRule("self >= 1", "numProcPerNode must be greater than or equal to 1")
MANAGED_BY: Final = CelRule(
    f"self in [{', '.join(repr(v) for v in MANAGED_BY_VALUES)}]",
    "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
)
TRAINER_STATUS_TIME: Final = CelRule(
    "!has(self.trainerStatus) || has(self.trainerStatus.lastUpdatedTime)",
    "lastUpdatedTime is required when trainerStatus is present",
)


def one_ml_policy(sources: Sequence[str]) -> CelRule:
    """At most one of the framework `sources` of an ML policy (their wire names) is set."""
    return CelRule(
        # (upstream's spelling, a missing space included)
        "[" + ", ".join(f"has(self.{p})" for p in sources[:-1]) + f",has(self.{sources[-1]})].filter(x, x).size() <= 1",
        "Only one of the policy can be configured",
    )


ONE_ML_POLICY: Final = one_ml_policy(ML_POLICIES)
ENV_INJECTION_NOT_NODE: Final = CelRule(
    f"!self.exists(c, c == '{c.NODE}')",
    "containerNames must not include the main node container because PET_* envs are always injected into it",
)
#: Beyond upstream (KEP-2903, proposed in T#3654: the KEP leaves `maxNodes >= minNodes` to a webhook; a CEL rule
#: says it where the object is written, with the webhook's words).
ELASTIC_MIN_LE_MAX: Final = CelRule(
    "!has(self.minNodes) || !has(self.maxNodes) || self.minNodes <= self.maxNodes",
    "maxNodes must be greater than or equal to minNodes",
)
MPI_NUM_PROC_PER_NODE: Final = CelRule("self >= 1", "NumProcPerNode in mpiPolicy must be >= 1")
FLUX_NUM_PROC_PER_NODE: Final = CelRule("self >= 1", "NumProcPerNode in fluxPolicy must be >= 1")
#: v2.4 (#4394): JobSet names pods `<trainjob>-<replicatedJob>-<jobIndex>-<podIndex>` and the TrainJob name may
#: take 63 - 20 characters of that; a longer replicated job name only fails later, in JobSet's webhook.
REPLICATED_JOB_NAME_MAX_LENGTH: Final = 20
REPLICATED_JOB_NAME_MAX_20: Final = CelRule(
    f"size(self) <= {REPLICATED_JOB_NAME_MAX_LENGTH}",
    f"replicatedJob name must be no more than {REPLICATED_JOB_NAME_MAX_LENGTH} characters",
)

# JobSet v1alpha2 rules, carried by the JobSet spec embedded in runtimes (as upstream's CRDs embed them).
JOBSET_IMMUTABLE: Final = CelRule("self == oldSelf", "Value is immutable")
JOBSET_STARTUP_XOR_DEPENDS_ON: Final = CelRule(
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
    "self.replicatedJobs.exists(x, has(x.dependsOn)))",
    "StartupPolicy and DependsOn APIs are mutually exclusive",
)
JOBSET_VCP_NO_NAMESPACE: Final = CelRule(
    "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",
    "namespace cannot be set for VolumeClaimPolicies templates",
)
