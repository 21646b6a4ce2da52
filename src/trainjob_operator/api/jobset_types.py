"""JobSet `jobset.x-k8s.io/v1alpha2` types, as embedded in runtimes and emitted by the operator (JobSet v0.12)."""

from typing import Any, Literal

from pydantic import Field

from .base import K8sModel
from .core import JobTemplateSpec, ObjectMeta
from .rules import (
    JOBSET_IMMUTABLE,
    JOBSET_STARTUP_XOR_DEPENDS_ON,
    JOBSET_VCP_NO_NAMESPACE,
    REPLICATED_JOB_NAME_MAX_20,
    x_validations,
)

_ATOMIC: dict[str, Any] = {"x-kubernetes-list-type": "atomic"}
_MAP_BY_NAME: dict[str, Any] = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}


class DependsOn(K8sModel):
    """A replicated job that must reach a status before this one starts."""

    name: str = Field(min_length=1, max_length=63)
    """Name of the replicated job waited for."""
    status: Literal["Ready", "Complete"]
    """Ready: its pods are ready; Complete: it completed."""


class ReplicatedJob(K8sModel):
    """A replicated job of a runtime's JobSet template (JobSet's own bound, 63, and the runtime's, 20)."""

    name: str = Field(min_length=1, max_length=63, json_schema_extra=x_validations(REPLICATED_JOB_NAME_MAX_20))
    """Name of the replicated job (at most 20 characters in a runtime): node, launcher, dataset-initializer, model-initializer, ..."""
    group_name: str | None = Field(default="default", max_length=63)
    """Group of replicated jobs it belongs to. Defaults to default."""
    template: JobTemplateSpec
    """The Job template of each replica."""
    replicas: int | None = Field(default=1, ge=0)
    """Number of Jobs created from the template. Defaults to 1."""
    depends_on: list[DependsOn] | None = Field(
        default=None, max_length=5, json_schema_extra={**_MAP_BY_NAME, **x_validations(JOBSET_IMMUTABLE)}
    )
    """Replicated jobs that must be Ready or Complete before this one starts."""


class Network(K8sModel):
    """The network of the JobSet's pods: a headless Service and stable hostnames."""

    model_config = {"json_schema_extra": x_validations(JOBSET_IMMUTABLE)}

    enable_dns_hostnames: bool | None = Field(default=None, alias="enableDNSHostnames")
    """Whether pods get hostnames <jobset>-<job>-<index>-<pod>.<subdomain>. Defaults to true."""
    subdomain: str | None = None
    """Subdomain of the pods (the headless Service). Defaults to the JobSet's name."""
    publish_not_ready_addresses: bool | None = None
    """Whether pods are resolvable before they are ready. Defaults to true."""


class SuccessPolicy(K8sModel):
    """When the JobSet succeeds."""

    model_config = {"json_schema_extra": x_validations(JOBSET_IMMUTABLE)}

    operator: Literal["All", "Any"] = "All"
    """All: every Job of the target replicated jobs completed; Any: one did. Defaults to All."""
    target_replicated_jobs: list[str] | None = Field(default=None, json_schema_extra=_ATOMIC)
    """The replicated jobs that count (default: all)."""


class FailurePolicyRule(K8sModel):
    """What to do when a Job fails in a given way."""

    name: str = Field(min_length=1, max_length=128)
    """Name of the rule."""
    action: Literal["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
    """FailJobSet, RestartJobSet, or RestartJobSetAndIgnoreMaxRestarts."""
    on_job_failure_reasons: list[str] | None = None
    """Job failure reasons the rule matches (any when unset)."""
    on_job_failure_message_patterns: list[str] | None = None
    """Regular expressions of Job failure messages the rule matches (any when unset)."""
    target_replicated_jobs: list[str] | None = Field(default=None, json_schema_extra=_ATOMIC)
    """Replicated jobs the rule applies to (all when unset)."""


class FailurePolicy(K8sModel):
    """What happens when a Job of the JobSet fails."""

    model_config = {"json_schema_extra": x_validations(JOBSET_IMMUTABLE)}

    max_restarts: int | None = Field(default=None, ge=0)
    """Times the JobSet is recreated after a failure before it fails."""
    restart_strategy: Literal["Recreate", "BlockingRecreate"] | None = "Recreate"
    """Recreate: each Job recreated on its own; BlockingRecreate: all deleted before any is created again. Defaults to Recreate."""
    rules: list[FailurePolicyRule] | None = None
    """Rules matched in order against a failed Job; the first match decides."""


class StartupPolicy(K8sModel):
    """The order in which the replicated jobs start."""

    model_config = {"json_schema_extra": x_validations(JOBSET_IMMUTABLE)}

    startup_policy_order: Literal["AnyOrder", "InOrder"]
    """AnyOrder: all at once; InOrder: each once the one before is ready."""


class Coordinator(K8sModel):
    """The pod whose stable address is given to every pod (label and annotation jobset.sigs.k8s.io/coordinator)."""

    replicated_job: str
    """Replicated job of the coordinator pod."""
    job_index: int | None = None
    """Index of its Job. Defaults to 0."""
    pod_index: int | None = None
    """Index of the pod in that Job. Defaults to 0."""


class VolumeRetentionPolicy(K8sModel):
    """What becomes of the JobSet's PersistentVolumeClaims."""

    when_deleted: Literal["Delete", "Retain"] | None = None
    """Delete: deleted with the JobSet; Retain: kept."""


class VolumeClaimPolicy(K8sModel):
    """PersistentVolumeClaims created for the JobSet and shared by its pods."""

    model_config = {"json_schema_extra": x_validations(JOBSET_VCP_NO_NAMESPACE)}

    templates: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=50,
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "x-k8s-definition": "io.k8s.api.core.v1.PersistentVolumeClaim",
        },
    )
    """Templates of the claims."""
    retention_policy: VolumeRetentionPolicy | None = None
    """What becomes of them."""


class JobSetSpec(K8sModel):
    """A JobSet (jobset.x-k8s.io/v1alpha2): a group of Jobs run as one unit."""

    model_config = {"json_schema_extra": x_validations(JOBSET_STARTUP_XOR_DEPENDS_ON)}

    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list, max_length=100, json_schema_extra=_MAP_BY_NAME)
    """The Jobs of the JobSet, each replicated from a template."""
    network: Network | None = None
    """Pod hostnames and the headless Service."""
    success_policy: SuccessPolicy | None = None
    """When the JobSet succeeds."""
    failure_policy: FailurePolicy | None = None
    """What happens when a Job fails."""
    startup_policy: StartupPolicy | None = None
    """The order in which the replicated jobs start."""
    suspend: bool | None = None
    """Whether the JobSet is suspended (the operator sets it from the TrainJob)."""
    coordinator: Coordinator | None = None
    """The pod whose address every pod gets."""
    managed_by: str | None = None
    """The controller of the JobSet (the JobSet controller by default)."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Seconds after it finished that the JobSet is deleted (not with a runtime runPolicy)."""
    volume_claim_policies: list[VolumeClaimPolicy] | None = Field(
        default=None,
        max_length=50,
        json_schema_extra={"x-kubernetes-list-type": "atomic", **x_validations(JOBSET_IMMUTABLE)},
    )
    """PersistentVolumeClaims created for the JobSet."""


class JobSetTemplateSpec(K8sModel):
    """`spec.template` of a runtime: JobSet metadata (labels/annotations used) and a full JobSet spec."""

    metadata: ObjectMeta | None = None
    """Labels and annotations of the JobSet."""
    spec: JobSetSpec = Field(default_factory=JobSetSpec)
    """The JobSet spec."""
