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
from .runtime import StallPolicy, TorchElasticPolicy

MAX_COMMAND_ITEM = 1048576
CommandItem = Annotated[str, StringConstraints(max_length=MAX_COMMAND_ITEM)]

_MAP_BY_NAME: dict[str, Any] = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
_IMMUTABLE_MAP_BY_NAME: dict[str, Any] = {**_MAP_BY_NAME, **x_validations(IMMUTABLE)}
# Names the Kubernetes definition of a dict-typed field (of its items, for a list), for the CRD generator.
_K8S = "x-k8s-definition"


class RuntimeRef(ApiModel):
    """The training runtime a TrainJob runs with."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the runtime: a ClusterTrainingRuntime, or a TrainingRuntime in the TrainJob's namespace."""
    api_group: str | None = Field(default=c.GROUP, max_length=253)
    """API group of the runtime: trainer.kubeflow.org (the default)."""
    kind: str | None = Field(default=c.CLUSTER_TRAINING_RUNTIME_KIND, max_length=253)
    """Kind of the runtime: ClusterTrainingRuntime (the default) or TrainingRuntime."""


class InitializerSource(ApiModel):
    """Where an initializer loads from, before training starts."""

    storage_uri: str | None = Field(default=None, max_length=2048, json_schema_extra=x_validations(STORAGE_URI))
    """URI to load from: hf://ORG/NAME (Hugging Face), s3://BUCKET/PATH, or another scheme the initializer supports. Overrides the runtime's STORAGE_URI."""
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=128,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Environment variables for the initializer container, merged over the runtime's."""
    secret_ref: LocalObjectReference | None = None
    """A Secret in the TrainJob's namespace whose keys become environment variables of the initializer (credentials such as a Hugging Face token)."""


class Initializer(ApiModel):
    """The dataset and model to fetch into the shared volume before training; the runtime needs a dataset-initializer / model-initializer job for each."""

    dataset: InitializerSource | None = None
    """The dataset initializer: where the training data comes from."""
    model: InitializerSource | None = None
    """The model initializer: where the pre-trained model comes from."""


class Trainer(ApiModel):
    """Overrides of the runtime's trainer: what each training node runs and with which resources."""

    image: str | None = Field(default=None, max_length=500)
    """Container image of the trainer (default: the runtime's)."""
    command: list[CommandItem] | None = Field(
        default=None, max_length=128, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Entrypoint of the trainer container (default: the runtime's)."""
    args: list[CommandItem] | None = Field(
        default=None, max_length=128, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """Arguments to the trainer's entrypoint."""
    env: list[EnvVar] | None = Field(
        default=None,
        max_length=128,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Environment variables of the trainer container, merged over the runtime's."""
    num_nodes: int | None = Field(default=None, ge=0)
    """Number of training nodes (default: the runtime's mlPolicy.numNodes). May change only while the TrainJob is
    suspended, or, with an elasticPolicy here, at any time within its bounds (the operator resizes the job)."""
    resources_per_node: ResourceRequirements | None = None
    """Compute resources (CPU, memory, GPUs) of each training node. May change only while the TrainJob is suspended."""
    num_proc_per_node: int | None = Field(default=None, json_schema_extra=x_validations(NUM_PROC_PER_NODE))
    """Processes per training node (torch: processes per node of torchrun; MPI: slots per node). Unset: the runtime decides."""
    elastic_policy: TorchElasticPolicy | None = None
    """Upstream's proposal (KEP-2903): elastic PyTorch for this TrainJob, field by field over the runtime's
    `mlPolicy.torch.elasticPolicy` (a torch runtime only). With it, numNodes may change while the TrainJob runs."""


class ContainerPatch(ApiModel):
    """Changes to one container of the runtime's pod template."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the container of the runtime to change."""
    env: list[EnvVar] | None = Field(default=None, max_length=128, json_schema_extra=_MAP_BY_NAME)
    """Environment variables added to the container."""
    volume_mounts: list[VolumeMount] | None = Field(default=None, max_length=128, json_schema_extra=_MAP_BY_NAME)
    """Volume mounts added to the container."""
    security_context: dict[str, Any] | None = Field(
        default=None, json_schema_extra={_K8S: "io.k8s.api.core.v1.SecurityContext"}
    )
    """The container's security context."""


class PodSpecPatch(ApiModel):
    """Changes to the pod spec of a replicated job of the runtime."""

    service_account_name: str | None = Field(default=None, max_length=253, json_schema_extra=x_validations(IMMUTABLE))
    """ServiceAccount the pods run as."""
    volumes: list[Volume] | None = Field(default=None, max_length=128, json_schema_extra=_IMMUTABLE_MAP_BY_NAME)
    """Volumes added to the pods."""
    init_containers: list[ContainerPatch] | None = Field(
        default=None, max_length=64, json_schema_extra=_IMMUTABLE_MAP_BY_NAME
    )
    """Changes to init containers of the runtime (by name)."""
    containers: list[ContainerPatch] | None = Field(
        default=None, max_length=64, json_schema_extra=_IMMUTABLE_MAP_BY_NAME
    )
    """Changes to containers of the runtime (by name)."""
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None, max_length=64, json_schema_extra=_IMMUTABLE_MAP_BY_NAME
    )
    """Secrets to pull the images with."""
    security_context: dict[str, Any] | None = Field(
        default=None,
        json_schema_extra={_K8S: "io.k8s.api.core.v1.PodSecurityContext", **x_validations(IMMUTABLE)},
    )
    """The pods' security context."""
    node_selector: dict[str, str] | None = None
    """Node labels the pods must be scheduled on."""
    affinity: dict[str, Any] | None = Field(default=None, json_schema_extra={_K8S: "io.k8s.api.core.v1.Affinity"})
    """Scheduling constraints of the pods."""
    tolerations: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=128,
        json_schema_extra={_K8S: "io.k8s.api.core.v1.Toleration", "x-kubernetes-list-type": "atomic"},
    )
    """Taints the pods tolerate."""
    scheduling_gates: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra={_K8S: "io.k8s.api.core.v1.PodSchedulingGate", **_MAP_BY_NAME},
    )
    """Gates that hold the pods back from scheduling until removed."""
    termination_grace_period_seconds: int | None = Field(
        default=None, ge=0, json_schema_extra={"format": "int64", **x_validations(IMMUTABLE)}
    )
    """Seconds a pod is given to stop gracefully."""


class PodTemplatePatch(ApiModel):
    """Changes to the pod template of a replicated job."""

    metadata: ObjectMeta | None = None
    """Labels and annotations added to the pods."""
    spec: PodSpecPatch | None = None
    """Changes to the pod spec."""


class JobSpecPatch(ApiModel):
    """Changes to the Job spec of a replicated job."""

    template: PodTemplatePatch | None = None
    """Changes to the Job's pod template."""


class JobTemplatePatch(ApiModel):
    """Changes to the Job template of a replicated job."""

    metadata: ObjectMeta | None = None
    """Labels and annotations added to the Jobs."""
    spec: JobSpecPatch | None = None
    """Changes to the Job spec."""


class ReplicatedJobPatch(ApiModel):
    """Changes to one replicated job of the runtime's JobSet template."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the replicated job of the runtime to change."""
    template: JobTemplatePatch | None = None
    """Changes to its Job template."""


class JobSetSpecPatch(ApiModel):
    """Changes to the JobSet spec of the runtime."""

    replicated_jobs: list[ReplicatedJobPatch] | None = Field(
        default=None, max_length=100, json_schema_extra=_MAP_BY_NAME
    )
    """Changes per replicated job (by name; each must exist in the runtime)."""


class JobSetTemplatePatch(ApiModel):
    """Changes to the runtime's JobSet template."""

    metadata: ObjectMeta | None = None
    """Labels and annotations added to the JobSet."""
    spec: JobSetSpecPatch | None = None
    """Changes to the JobSet spec."""


class TrainingRuntimeSpecPatch(ApiModel):
    """Changes to the runtime's spec."""

    template: JobSetTemplatePatch | None = None
    """Changes to the runtime's JobSet template."""


class RuntimePatch(ApiModel):
    """Changes one manager (a user, Kueue, another controller) makes to the runtime for this TrainJob."""

    manager: str = Field(min_length=1, max_length=253, json_schema_extra=x_validations(IMMUTABLE))
    """Who made the patch, a domain-prefixed path (example.com/tool); one patch per manager. Immutable."""
    time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When the patch was last changed."""
    training_runtime_spec: TrainingRuntimeSpecPatch | None = None
    """The changes to the runtime's spec."""


class TrainJobSpec(ApiModel):
    """What to train and how: the runtime and the overrides of this TrainJob."""

    model_config = {"json_schema_extra": x_validations(RESIZE_WHILE_SUSPENDED)}

    runtime_ref: RuntimeRef = Field(json_schema_extra=x_validations(IMMUTABLE))
    """The runtime this TrainJob runs with. Immutable."""
    initializer: Initializer | None = Field(default=None, json_schema_extra=x_validations(IMMUTABLE))
    """The dataset and model to fetch before training. Immutable."""
    trainer: Trainer | None = None
    """Overrides of the runtime's trainer for this TrainJob. Immutable, except numNodes and resourcesPerNode while the
    TrainJob is suspended (the rule is on the spec)."""
    runtime_patches: list[RuntimePatch] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["manager"]},
    )
    """Changes to the runtime for this TrainJob only, applied in order, one per manager."""
    suspend: bool | None = False
    """Whether the TrainJob is suspended: its pods are deleted and not created again until it is resumed. Defaults to false."""
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, json_schema_extra={"format": "int64", **x_validations(IMMUTABLE)}
    )
    """Seconds the TrainJob may run, counted from its last start (creation or resume), before it fails with reason DeadlineExceeded and its pods are stopped. Immutable."""
    managed_by: str | None = Field(
        default=c.DEFAULT_MANAGED_BY, max_length=253, json_schema_extra=x_validations(MANAGED_BY, IMMUTABLE)
    )
    """The controller that reconciles this TrainJob: trainer.kubeflow.org/trainjob-controller (the default) or kueue.x-k8s.io/multikueue (Kueue dispatches it to a worker cluster). Immutable."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int32"})
    """Upstream's proposal (T#4052): the TrainJob is deleted this long after it finished (mutable). Overrides the
    runtime's `runPolicy.ttlSecondsAfterFinished`."""
    startup_deadline_seconds: int | None = Field(
        default=None, ge=1, json_schema_extra={"format": "int64", **x_validations(IMMUTABLE)}
    )
    """Beyond upstream: fail the TrainJob when a pod is still unschedulable or cannot pull its image this long after
    the TrainJob started. Overrides the runtime's `runPolicy.startupDeadlineSeconds`."""
    stall_policy: StallPolicy | None = None
    """Beyond upstream (issue 35): when the TrainJob, running but no longer reporting progress, is Stalled and what
    is done about it. Each field set here overrides the runtime's `runPolicy.stallPolicy`."""


class Condition(K8sModel):
    """A condition of the TrainJob (Suspended, Complete, Failed, Created)."""

    k8s_definition: ClassVar[str] = "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class JobStatus(ApiModel):
    """Pod and Job counts of one replicated job of the TrainJob's JobSet."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the replicated job."""
    ready: int = Field(ge=0)
    """Jobs with at least their expected number of ready pods."""
    succeeded: int = Field(ge=0)
    """Jobs that completed."""
    failed: int = Field(ge=0)
    """Jobs that failed."""
    active: int = Field(ge=0)
    """Jobs with at least one pod running or pending."""
    suspended: int = Field(ge=0)
    """Jobs that are suspended."""


class TrainerMetric(ApiModel):
    """One metric the training code reported."""

    name: str = Field(min_length=1, max_length=64)
    """Name of the metric (loss, accuracy, ...)."""
    value: str = Field(min_length=1, max_length=64)
    """Its latest value, as text."""


class TrainerStatus(ApiModel):
    """Progress the training code reports through the operator's status server."""

    progress_percentage: int | None = Field(default=None, ge=0, le=100)
    """How far the training is, 0-100."""
    estimated_remaining_seconds: int | None = Field(default=None, ge=0)
    """Seconds the training expects to need still."""
    metrics: list[TrainerMetric] | None = Field(
        default=None, max_length=256, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """The latest metrics of the training."""
    last_updated_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When the training last reported."""


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


class ElasticStatus(ApiModel):
    """Beyond upstream: the size of an elastic PyTorch TrainJob (runtime `mlPolicy.torch.elasticPolicy`;
    docs/elastic.md)."""

    current_nodes: int = Field(default=0, ge=0, json_schema_extra={"format": "int32"})
    """Trainer pods running now."""
    desired_nodes: int = Field(default=0, ge=0, json_schema_extra={"format": "int32"})
    """The size the JobSet is set to (its trainer job's parallelism)."""
    min_nodes: int = Field(default=1, ge=1, json_schema_extra={"format": "int32"})
    """The policy's bounds, as the JobSet was built with them."""
    max_nodes: int = Field(default=1, ge=1, json_schema_extra={"format": "int32"})
    """The policy's bounds, as the JobSet was built with them."""
    resizes: int = Field(default=0, ge=0, json_schema_extra={"format": "int32"})
    """Resizes the operator made; each is one re-rendezvous of torchrun's agents (not counted in `restarts`,
    which counts failures)."""
    scaling: Literal["Enabled", "Unavailable"] = "Enabled"
    """Unavailable: JobSet refused to resize (its ElasticJobSet feature gate is off); the TrainJob runs at the size
    it has (`message` says why)."""
    message: str | None = Field(default=None, max_length=1024)
    """Why the size is what it is (the last resize, or why scaling is unavailable)."""
    last_resize_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When the operator last resized the JobSet."""
    last_shrink_time: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """When it last shrank the JobSet for want of capacity: growing back is tried again a while after."""
    below_min_nodes_since: str | None = Field(default=None, json_schema_extra={"format": "date-time"})
    """Since when fewer than minNodes trainer pods run (after the TrainJob had reached minNodes)."""
    jobset_uid: str | None = Field(default=None, max_length=64)
    """The JobSet these counts are of (a rebuilt JobSet starts afresh)."""
    rendezvous_index: int = Field(default=0, ge=0, json_schema_extra={"format": "int32"})
    """The completion index of the trainer pod whose c10d store the rendezvous Service selects: 0 until that pod is
    lost, then the lowest index still running (docs/elastic.md, "The rendezvous")."""


class Goodput(ApiModel):
    """Beyond upstream (issue 35): the TrainJob's time by phase, closed phases summed; the current one runs from
    `since` (readers add it up to their now). Written only with a change of state, never on its own."""

    phase: Literal["Queued", "Starting", "Training", "Restarting", "Stalled", "Finished"]
    """What the TrainJob does now: Queued (suspended), Starting (before its first pod runs), Training (state
    Running), Restarting (after a failure, a restart or a resume that follows training), Stalled, Finished."""
    since: str = Field(json_schema_extra={"format": "date-time"})
    """When the current phase began."""
    queued_seconds: int = Field(default=0, ge=0, json_schema_extra={"format": "int64"})
    """Seconds queued: suspended (by Kueue or a user) before or between runs."""
    starting_seconds: int = Field(default=0, ge=0, json_schema_extra={"format": "int64"})
    """Seconds starting: admitted, before the first pod of the first attempt runs."""
    training_seconds: int = Field(default=0, ge=0, json_schema_extra={"format": "int64"})
    """Seconds training: state Running (a pod runs, none is failing) and not stalled."""
    restarting_seconds: int = Field(default=0, ge=0, json_schema_extra={"format": "int64"})
    """Seconds restarting: after a failure, a restart or a resume that follows training, until a pod runs again."""
    stalled_seconds: int = Field(default=0, ge=0, json_schema_extra={"format": "int64"})
    """Seconds stalled: running without the progress reports the stallPolicy asks for."""
    accelerators: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int64"})
    """Accelerators (extended resources such as nvidia.com/gpu) the JobSet's pods ask for, in all."""
    idle_accelerator_seconds: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int64"})
    """Accelerator-seconds held (starting, restarting, stalled) while not training."""
    first_progress_seconds: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int64"})
    """From the TrainJob's creation to its first progress report."""
    percent: int | None = Field(default=None, ge=0, le=100)
    """Training seconds as a share of all seconds, as of the last change of phase."""
    stalls: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int32"})
    """Stalls detected."""
    stalled_report: str | None = Field(default=None, max_length=64)
    """The `trainerStatus.lastUpdatedTime` the current stall was detected after (`none`: no report): a newer
    report ends the stall."""
    restart_of: str | None = Field(default=None, max_length=128)
    """The uid of the JobSet a stall restarts: deleted (again, after an operator restart) until it is gone."""


class TrainJobStatus(ApiModel):
    """What the operator observed of the TrainJob."""

    # The trainerStatus rule reads `self.trainerStatus`, so it lives on `status` (upstream puts the equivalent
    # `has(self.lastUpdatedTime)` on trainerStatus itself; the message is the same).
    model_config = {"json_schema_extra": {"minProperties": 1, **x_validations(TRAINER_STATUS_TIME)}}

    conditions: list[Condition] | None = Field(
        default=None,
        max_length=8,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """The TrainJob's conditions: Suspended, Complete, Failed (what the kubeflow SDK and Kueue read)."""
    jobs_status: list[JobStatus] | None = Field(default=None, max_length=100, json_schema_extra=_MAP_BY_NAME)
    """Counts per replicated job of the JobSet."""
    trainer_status: TrainerStatus | None = None
    """Progress reported by the training code."""
    state: Literal["Pending", "Suspended", "Running", "Restarting", "Stalled", "Complete", "Failed", "Error"] | None = (
        None
    )
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
    elastic: ElasticStatus | None = None
    """Beyond upstream: the current and desired size of an elastic PyTorch TrainJob, and its resizes."""
    goodput: Goodput | None = None
    """Beyond upstream (issue 35): where the TrainJob's time went (queued, starting, training, restarting, stalled)
    and the share that was training."""


class TrainJob(ApiModel):
    """A training job: a runtime and the overrides of this run (image, command, nodes, resources, dataset and model). The operator builds a JobSet from them."""

    model_config = {"json_schema_extra": x_validations(NAME_RFC1035, NAME_MAX_63)}

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainJob"] = c.TRAINJOB_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainJobSpec
    """What to train and how."""
    status: TrainJobStatus | None = None
    """What the operator observed."""

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or "default"
