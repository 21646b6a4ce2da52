"""TrainJob `trainer.kubeflow.org/v1alpha1`: what a practitioner submits."""

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StringConstraints

from . import constants as c
from .base import ApiModel, K8sModel
from .core import (
    EnvVar,
    LocalObjectReference,
    ObjectMeta,
    ResourceRequirements,
    Volume,
    VolumeMount,
)
from .rules import (
    IMMUTABLE,
    MANAGED_BY,
    NAME_MAX_63,
    NAME_RFC1035,
    NUM_PROC_PER_NODE,
    RESIZE_WHILE_SUSPENDED,
    STORAGE_URI,
    TRAINER_STATUS_TIME,
    x_validations,
)

MAX_COMMAND_ITEM = 1048576
CommandItem = Annotated[str, StringConstraints(max_length=MAX_COMMAND_ITEM)]

_MAP_BY_NAME: dict[str, Any] = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
_IMMUTABLE_MAP_BY_NAME: dict[str, Any] = {**_MAP_BY_NAME, **x_validations(IMMUTABLE)}
# Names the Kubernetes definition of a dict-typed field (of its items, for a list), for the CRD generator.
_K8S = "x-k8s-definition"


class RuntimeRef(ApiModel):
    name: str = Field(min_length=1, max_length=253)
    api_group: str | None = Field(default=c.GROUP, max_length=253)
    kind: str | None = Field(default=c.CLUSTER_TRAINING_RUNTIME_KIND, max_length=253)


class InitializerSource(ApiModel):
    storage_uri: str | None = Field(default=None, max_length=2048, json_schema_extra=x_validations(STORAGE_URI))
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=128,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    secret_ref: LocalObjectReference | None = None


class Initializer(ApiModel):
    dataset: InitializerSource | None = None
    model: InitializerSource | None = None


class Trainer(ApiModel):
    image: str | None = Field(default=None, max_length=500)
    command: list[CommandItem] | None = Field(
        default=None, max_length=128, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    args: list[CommandItem] | None = Field(
        default=None, max_length=128, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=128,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    num_nodes: int | None = Field(default=None, ge=0)
    resources_per_node: ResourceRequirements | None = None
    num_proc_per_node: int | None = Field(default=None, json_schema_extra=x_validations(NUM_PROC_PER_NODE))


class ContainerPatch(ApiModel):
    name: str = Field(min_length=1, max_length=253)
    env: list[EnvVar] | None = Field(default=None, max_length=128, json_schema_extra=_MAP_BY_NAME)
    volume_mounts: list[VolumeMount] | None = Field(default=None, max_length=128, json_schema_extra=_MAP_BY_NAME)
    security_context: dict[str, Any] | None = Field(
        default=None, json_schema_extra={_K8S: "io.k8s.api.core.v1.SecurityContext"}
    )


class PodSpecPatch(ApiModel):
    service_account_name: str | None = Field(default=None, max_length=253, json_schema_extra=x_validations(IMMUTABLE))
    volumes: list[Volume] | None = Field(default=None, max_length=128, json_schema_extra=_IMMUTABLE_MAP_BY_NAME)
    init_containers: list[ContainerPatch] | None = Field(
        default=None, max_length=64, json_schema_extra=_IMMUTABLE_MAP_BY_NAME
    )
    containers: list[ContainerPatch] | None = Field(
        default=None, max_length=64, json_schema_extra=_IMMUTABLE_MAP_BY_NAME
    )
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None, max_length=64, json_schema_extra=_IMMUTABLE_MAP_BY_NAME
    )
    security_context: dict[str, Any] | None = Field(
        default=None,
        json_schema_extra={_K8S: "io.k8s.api.core.v1.PodSecurityContext", **x_validations(IMMUTABLE)},
    )
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = Field(default=None, json_schema_extra={_K8S: "io.k8s.api.core.v1.Affinity"})
    tolerations: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=128,
        json_schema_extra={_K8S: "io.k8s.api.core.v1.Toleration", "x-kubernetes-list-type": "atomic"},
    )
    scheduling_gates: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra={_K8S: "io.k8s.api.core.v1.PodSchedulingGate", **_MAP_BY_NAME},
    )
    termination_grace_period_seconds: int | None = Field(
        default=None, ge=0, json_schema_extra={"format": "int64", **x_validations(IMMUTABLE)}
    )


class PodTemplatePatch(ApiModel):
    metadata: ObjectMeta | None = None
    spec: PodSpecPatch | None = None


class JobSpecPatch(ApiModel):
    template: PodTemplatePatch | None = None


class JobTemplatePatch(ApiModel):
    metadata: ObjectMeta | None = None
    spec: JobSpecPatch | None = None


class ReplicatedJobPatch(ApiModel):
    name: str = Field(min_length=1, max_length=253)
    template: JobTemplatePatch | None = None


class JobSetSpecPatch(ApiModel):
    replicated_jobs: list[ReplicatedJobPatch] | None = Field(
        default=None, max_length=100, json_schema_extra=_MAP_BY_NAME
    )


class JobSetTemplatePatch(ApiModel):
    metadata: ObjectMeta | None = None
    spec: JobSetSpecPatch | None = None


class TrainingRuntimeSpecPatch(ApiModel):
    template: JobSetTemplatePatch | None = None


class RuntimePatch(ApiModel):
    manager: str = Field(min_length=1, max_length=253, json_schema_extra=x_validations(IMMUTABLE))
    time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None


class TrainJobSpec(ApiModel):
    model_config = {"json_schema_extra": x_validations(RESIZE_WHILE_SUSPENDED)}

    runtime_ref: RuntimeRef = Field(json_schema_extra=x_validations(IMMUTABLE))
    initializer: Initializer | None = Field(default=None, json_schema_extra=x_validations(IMMUTABLE))
    trainer: Trainer | None = None
    """Immutable, except `numNodes` and `resourcesPerNode` while the TrainJob is suspended (the rule is on the spec)."""
    runtime_patches: list[RuntimePatch] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["manager"]},
    )
    suspend: bool | None = False
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, json_schema_extra={"format": "int64", **x_validations(IMMUTABLE)}
    )
    managed_by: str | None = Field(
        default=c.DEFAULT_MANAGED_BY, max_length=253, json_schema_extra=x_validations(MANAGED_BY, IMMUTABLE)
    )
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int32"})
    """Upstream's proposal (T#4052): the TrainJob is deleted this long after it finished (mutable). Overrides the
    runtime's `runPolicy.ttlSecondsAfterFinished`."""
    startup_deadline_seconds: int | None = Field(
        default=None, ge=1, json_schema_extra={"format": "int64", **x_validations(IMMUTABLE)}
    )
    """Beyond upstream: fail the TrainJob when a pod is still unschedulable or cannot pull its image this long after
    the TrainJob started. Overrides the runtime's `runPolicy.startupDeadlineSeconds`."""


class Condition(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class JobStatus(ApiModel):
    name: str = Field(min_length=1, max_length=253)
    ready: int = Field(ge=0)
    succeeded: int = Field(ge=0)
    failed: int = Field(ge=0)
    active: int = Field(ge=0)
    suspended: int = Field(ge=0)


class TrainerMetric(ApiModel):
    name: str = Field(min_length=1, max_length=64)
    value: str = Field(min_length=1, max_length=64)


class TrainerStatus(ApiModel):
    progress_percentage: int | None = Field(default=None, ge=0, le=100)
    estimated_remaining_seconds: int | None = Field(default=None, ge=0)
    metrics: list[TrainerMetric] | None = Field(
        default=None, max_length=256, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    last_updated_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})


class RestartCounts(ApiModel):
    """Beyond upstream: what `status.restarts` is made of (the kubeflow SDK ignores it)."""

    job_set: int = Field(default=0, ge=0, json_schema_extra={"format": "int32"})
    """Restarts of the whole JobSet, summed over every JobSet the TrainJob had (what `maxRestarts` limits)."""
    pods: int = Field(default=0, ge=0, json_schema_extra={"format": "int32"})
    """Pod restarts seen: container restarts and failed pods replaced by a new one, over every set of pods."""
    pods_before_attempt: int = Field(default=0, ge=0, json_schema_extra={"format": "int32"})
    """Of `pods`, the restarts of earlier sets of pods (gone with a JobSet restart, a suspend or a rebuild)."""
    attempt: str | None = Field(default=None, max_length=512)
    """Which set of pods `pods - podsBeforeAttempt` was counted on: the JobSet's uid, its restart count and the
    TrainJob's startTime."""


class TrainJobStatus(ApiModel):
    # The trainerStatus rule reads `self.trainerStatus`, so it lives on `status` (upstream puts the equivalent
    # `has(self.lastUpdatedTime)` on trainerStatus itself; the message is the same).
    model_config = {"json_schema_extra": {"minProperties": 1, **x_validations(TRAINER_STATUS_TIME)}}

    conditions: list[Condition] | None = Field(
        default=None,
        max_length=8,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    jobs_status: list[JobStatus] | None = Field(default=None, max_length=100, json_schema_extra=_MAP_BY_NAME)
    trainer_status: TrainerStatus | None = None
    state: Literal["Pending", "Suspended", "Running", "Restarting", "Complete", "Failed", "Error"] | None = None
    """Beyond upstream: the lifecycle state for `kubectl get`, from the TrainJob's conditions and its pods (the
    kubeflow SDK ignores it): Running only while a pod runs and none is failing or unschedulable."""
    reason: str | None = Field(default=None, max_length=64)
    """Beyond upstream: why the state is what it is, one word (`Unschedulable`, `CrashLoopBackOff`, `PodFailed`,
    `ImagePullBackOff`, ...); absent when there is nothing to explain."""
    message: str | None = Field(default=None, max_length=1024)
    """Beyond upstream: the details of `reason`, naming the pod (the scheduler's message, a container's exit
    code)."""
    nodes: int | None = Field(default=None, ge=0)
    """Beyond upstream: the number of nodes as the TrainJob asks for them (`numNodes`; an MPI launcher that runs
    as a node counts)."""
    start_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """Upstream's proposal (T#4052, JobSet's meaning): when the TrainJob last started running (set when it is
    created or resumed unsuspended, cleared while it is suspended)."""
    completion_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """Upstream's proposal (T#4052): when the operator saw the TrainJob finish (Complete or Failed); the TTL
    counts from it."""
    restarts: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int32"})
    """Beyond upstream: how often the training restarted, as it happens: restarts of the whole JobSet (summed over
    every JobSet the TrainJob had) plus pod restarts (a container restarted, a failed pod replaced)."""
    restart_counts: RestartCounts | None = None
    """Beyond upstream: `restarts` by kind."""


class TrainJob(ApiModel):
    model_config = {"json_schema_extra": x_validations(NAME_RFC1035, NAME_MAX_63)}

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainJob"] = c.TRAINJOB_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainJobSpec
    status: TrainJobStatus | None = None

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"
