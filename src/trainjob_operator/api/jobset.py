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
    name: str = Field(min_length=1, max_length=63)
    status: Literal["Ready", "Complete"]


class ReplicatedJob(K8sModel):
    """A replicated job of a runtime's JobSet template (JobSet's own bound, 63, and the runtime's, 20)."""

    name: str = Field(min_length=1, max_length=63, json_schema_extra=x_validations(REPLICATED_JOB_NAME_MAX_20))
    group_name: str | None = Field(default="default", max_length=63)
    template: JobTemplateSpec
    replicas: int | None = Field(default=1, ge=0)
    depends_on: list[DependsOn] | None = Field(
        default=None, max_length=5, json_schema_extra={**_MAP_BY_NAME, **x_validations(JOBSET_IMMUTABLE)}
    )


class Network(K8sModel):
    model_config = {"json_schema_extra": x_validations(JOBSET_IMMUTABLE)}

    enable_dns_hostnames: bool | None = Field(default=None, alias="enableDNSHostnames")
    subdomain: str | None = None
    publish_not_ready_addresses: bool | None = None


class SuccessPolicy(K8sModel):
    model_config = {"json_schema_extra": x_validations(JOBSET_IMMUTABLE)}

    operator: Literal["All", "Any"] = "All"
    target_replicated_jobs: list[str] | None = Field(default=None, json_schema_extra=_ATOMIC)


class FailurePolicyRule(K8sModel):
    name: str = Field(min_length=1, max_length=128)
    action: Literal["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]
    on_job_failure_reasons: list[str] | None = None
    on_job_failure_message_patterns: list[str] | None = None
    target_replicated_jobs: list[str] | None = Field(default=None, json_schema_extra=_ATOMIC)


class FailurePolicy(K8sModel):
    model_config = {"json_schema_extra": x_validations(JOBSET_IMMUTABLE)}

    max_restarts: int | None = Field(default=None, ge=0)
    restart_strategy: Literal["Recreate", "BlockingRecreate"] | None = "Recreate"
    rules: list[FailurePolicyRule] | None = None


class StartupPolicy(K8sModel):
    model_config = {"json_schema_extra": x_validations(JOBSET_IMMUTABLE)}

    startup_policy_order: Literal["AnyOrder", "InOrder"]


class Coordinator(K8sModel):
    replicated_job: str
    job_index: int | None = None
    pod_index: int | None = None


class VolumeRetentionPolicy(K8sModel):
    when_deleted: Literal["Delete", "Retain"] | None = None


class VolumeClaimPolicy(K8sModel):
    model_config = {"json_schema_extra": x_validations(JOBSET_VCP_NO_NAMESPACE)}

    templates: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=50,
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "x-k8s-definition": "io.k8s.api.core.v1.PersistentVolumeClaim",
        },
    )
    retention_policy: VolumeRetentionPolicy | None = None


class JobSetSpec(K8sModel):
    model_config = {"json_schema_extra": x_validations(JOBSET_STARTUP_XOR_DEPENDS_ON)}

    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list, max_length=100, json_schema_extra=_MAP_BY_NAME)
    network: Network | None = None
    success_policy: SuccessPolicy | None = None
    failure_policy: FailurePolicy | None = None
    startup_policy: StartupPolicy | None = None
    suspend: bool | None = None
    coordinator: Coordinator | None = None
    managed_by: str | None = None
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    volume_claim_policies: list[VolumeClaimPolicy] | None = Field(
        default=None,
        max_length=50,
        json_schema_extra={"x-kubernetes-list-type": "atomic", **x_validations(JOBSET_IMMUTABLE)},
    )


class JobSetTemplateSpec(K8sModel):
    """`spec.template` of a runtime: JobSet metadata (labels/annotations used) and a full JobSet spec."""

    metadata: ObjectMeta | None = None
    spec: JobSetSpec = Field(default_factory=JobSetSpec)
