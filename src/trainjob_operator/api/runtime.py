"""TrainingRuntime and ClusterTrainingRuntime: the blueprints platform admins publish."""

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, create_model
from pydantic.alias_generators import to_camel

from . import constants as c
from .base import ApiModel
from .core import ObjectMeta
from .jobset_types import JobSetTemplateSpec
from .rules import (
    ELASTIC_MIN_LE_MAX,
    ENV_INJECTION_NOT_NODE,
    FLUX_NUM_PROC_PER_NODE,
    ML_POLICIES,
    MPI_NUM_PROC_PER_NODE,
    ONE_ML_POLICY,
    one_ml_policy,
    x_validations,
)


class EnvInjectionTarget(ApiModel):
    """Containers of one replicated job that get the PyTorch distributed environment (MASTER_ADDR, WORLD_SIZE, ...)."""

    job_name: str = Field(min_length=1, max_length=253)
    """Name of the replicated job."""
    container_names: list[str] = Field(
        min_length=1,
        max_length=8,
        json_schema_extra={
            "x-kubernetes-list-type": "set",
            "x-items": {"maxLength": 63},
            **x_validations(ENV_INJECTION_NOT_NODE),
        },
    )
    """Names of its containers that get the environment."""


class TorchEnvInjection(ApiModel):
    """Where, beside the trainer, the PyTorch distributed environment is injected."""

    targets: list[EnvInjectionTarget] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["jobName"]},
    )
    """The replicated jobs and containers that get it (not the node job, which always does)."""


class TorchElasticPolicy(ApiModel):
    """Upstream's proposal (KEP-2903, T#3654): elastic PyTorch. torchrun runs with `--nnodes=minNodes:maxNodes` and
    a c10d rendezvous; the operator resizes the JobSet within the bounds as pods are lost or capacity returns
    (docs/elastic.md). Needs JobSet's ElasticJobSet feature gate; without it the TrainJob runs fixed-size and says
    so."""

    model_config = {"json_schema_extra": x_validations(ELASTIC_MIN_LE_MAX)}

    min_nodes: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int32"})
    """The fewest nodes the training continues on (default: 1)."""
    max_nodes: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int32"})
    """The most nodes it grows to (default: the TrainJob's numNodes)."""
    max_restarts: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int32"})
    """As in v2.0's API: torchrun's `--max-restarts` (PET_MAX_RESTARTS), how often the elastic agent restarts its
    workers after a failure or a lost node (a node joining costs none). Defaults to 3."""
    metrics: list[dict[str, Any]] | None = Field(
        default=None,
        max_length=8,
        json_schema_extra={
            "x-kubernetes-list-type": "atomic",
            "x-k8s-definition": "io.k8s.apimachinery.pkg.runtime.RawExtension",
        },
    )
    """autoscaling/v2 MetricSpecs (upstream's name). Not supported yet: a TrainJob whose runtime sets any is
    refused rather than scaled on nothing. Kept as free-form objects, not MetricSpec's whole schema: that schema
    alone took 13 KB of each runtime CRD, past the size a client-side `kubectl apply` can record."""
    below_min_nodes_seconds: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int32"})
    """Beyond upstream: how long the TrainJob may run below minNodes (lost pods that cannot be placed) before it
    fails with reason BelowMinNodes. Defaults to 600."""


class TorchMLPolicySource(ApiModel):
    """The PyTorch runtime: the trainer runs under torchrun, one process group over all nodes."""

    env_injection: TorchEnvInjection | None = None
    """More containers that get the PyTorch distributed environment."""
    elastic_policy: TorchElasticPolicy | None = None
    """Upstream's proposal (KEP-2903): elastic training between minNodes and maxNodes."""


class MPIMLPolicySource(ApiModel):
    """The MPI runtime: a launcher runs mpirun over the nodes through SSH, with a generated key pair and hostfile."""

    num_proc_per_node: int | None = Field(default=1, json_schema_extra=x_validations(MPI_NUM_PROC_PER_NODE))
    """Slots (processes) per node in the hostfile. Defaults to 1."""
    mpi_implementation: Literal["OpenMPI", ""] | None = "OpenMPI"
    """The MPI implementation: OpenMPI (the default)."""
    ssh_auth_mount_path: str | None = Field(default="/root/.ssh", max_length=4096)
    """Where the SSH keys are mounted in the containers. Defaults to /root/.ssh."""
    run_launcher_as_node: bool | None = False
    """Whether the launcher also trains, counting as one of the nodes. Defaults to false."""


class JAXMLPolicySource(ApiModel):
    """The JAX runtime: the coordinator address and process ids are set for jax.distributed."""

    pass


class XGBoostMLPolicySource(ApiModel):
    """The XGBoost runtime: the Rabit tracker address and worker ids are set for distributed XGBoost."""

    pass


class FluxMLPolicySource(ApiModel):
    """The Flux runtime: Flux Framework is installed into the nodes and runs the command as a Flux job."""

    num_proc_per_node: int | None = Field(default=1, json_schema_extra=x_validations(FLUX_NUM_PROC_PER_NODE))
    """Processes (tasks) per node. Defaults to 1."""


class MLPolicy(ApiModel):
    """The distributed training framework of the runtime and its node count; at most one framework."""

    model_config = {"json_schema_extra": x_validations(ONE_ML_POLICY)}

    num_nodes: int | None = None
    """Number of training nodes (a TrainJob's trainer.numNodes overrides it)."""
    torch: TorchMLPolicySource | None = None
    """PyTorch distributed training (torchrun)."""
    mpi: MPIMLPolicySource | None = None
    """MPI training (mpirun: DeepSpeed, Horovod, MLX)."""
    jax: JAXMLPolicySource | None = None
    """JAX distributed training."""
    xgboost: XGBoostMLPolicySource | None = None
    """Distributed XGBoost training."""
    flux: FluxMLPolicySource | None = None
    """Training under Flux Framework (HPC)."""


class CoschedulingPodGroupPolicySource(ApiModel):
    """Gang scheduling with the scheduler-plugins coscheduling plugin."""

    schedule_timeout_seconds: int | None = 60
    """Seconds the pods of a PodGroup may wait to be scheduled together. Defaults to 60."""


class VolcanoNetworkTopology(ApiModel):
    """How close in the network Volcano places the pods."""

    mode: Literal["hard", "soft"] | None = "hard"
    """hard: the pods must be placed within the tier; soft: as close as possible. Defaults to hard."""
    highest_tier_allowed: int | None = 1
    """The highest network tier the pods may span. Defaults to 1."""


class VolcanoPodGroupPolicySource(ApiModel):
    """Gang scheduling with Volcano (the queue comes from the scheduling.volcano.sh/queue-name annotation)."""

    network_topology: VolcanoNetworkTopology | None = None
    """Network-topology-aware placement."""


class PodGroupPolicy(ApiModel):
    """Gang scheduling: all pods of a TrainJob are scheduled together or not at all; at most one scheduler."""

    coscheduling: CoschedulingPodGroupPolicySource | None = None
    """The scheduler-plugins coscheduling plugin."""
    volcano: VolcanoPodGroupPolicySource | None = None
    """Volcano."""


class StallPolicy(ApiModel):
    """Beyond upstream (issue 35): what a running TrainJob that stops reporting progress
    (`kubeflow.trainer.update_trainjob_status()`) is called and what is done about it. On a runtime's `runPolicy`
    (the default of its TrainJobs) and on a TrainJob's `spec.stallPolicy` (each field set there wins)."""

    progress_timeout_seconds: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int64"})
    """The longest a running TrainJob whose current attempt reported progress may go without another report
    before it is Stalled. Unset: no stall detection."""
    first_progress_timeout_seconds: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int64"})
    """The longest an attempt (the pods running since the last start or restart) may run before its first report.
    Unset: an attempt that has not reported is never Stalled (a TrainJob that never reports is never Stalled)."""
    action: Literal["Report", "Restart", "Fail"] | None = None
    """What a stall does: `Report` (the default: state Stalled, a Warning Event, a metric), `Restart` (the JobSet is
    deleted and built again, counted against its `failurePolicy.maxRestarts`; Failed once that is spent) or `Fail`
    (Failed, reason Stalled)."""


class BasicSchedulingPolicy(ApiModel):
    """Pods are scheduled one by one, as without a policy (an empty object)."""


class GangSchedulingPolicy(ApiModel):
    """All pods of the group are bound together or none is (an empty object: the operator computes the size)."""

    min_count: int | None = Field(default=None, json_schema_extra={"format": "int32"})
    """Not to be set: the operator computes it from the TrainJob (`spec.trainer.numNodes`); a set value is refused."""


class PodGroupSchedulingPolicy(ApiModel):
    """How the pods of one group are scheduled: exactly one of basic and gang."""

    basic: BasicSchedulingPolicy | None = None
    """One by one."""
    gang: GangSchedulingPolicy | None = None
    """All together or none."""


class TopologyConstraint(ApiModel):
    """The pods of the group go to nodes that share one value of this node label."""

    key: str = Field(min_length=1, max_length=317)
    """A node label key (a topology level, such as topology.kubernetes.io/zone)."""


class PodGroupSchedulingConstraints(ApiModel):
    """Where the pods of the group may go together."""

    topology: list[TopologyConstraint] | None = Field(
        default=None, max_length=1, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """At most one topology level the whole group shares."""


class DisruptionMode(ApiModel):
    """What a disruption of one pod means for the group: exactly one of single and all (empty objects)."""

    single: BasicSchedulingPolicy | None = None
    """Only that pod is disrupted."""
    all: BasicSchedulingPolicy | None = None
    """The whole group is."""


class ReplicatedJobScheduling(ApiModel):
    """One pod group for the pods of the replicated jobs it names (level 2 of KEP-3015)."""

    target_replicated_jobs: list[str] = Field(
        min_length=1,
        max_length=8,
        json_schema_extra={"x-kubernetes-list-type": "set", "x-items": {"maxLength": 63}},
    )
    """The replicated jobs of the runtime's template whose pods form this group (each in one entry only)."""
    scheduling_policy: PodGroupSchedulingPolicy | None = None
    """Their policy; gang when unset."""
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    """Their placement constraints."""
    disruption_mode: DisruptionMode | None = None
    """How they are disrupted."""


class Scheduling(ApiModel):
    """Workload-aware scheduling by Kubernetes itself (the Workload and PodGroup API, `scheduling.k8s.io/v1beta1`,
    Kubernetes 1.37+; Kubeflow Trainer KEP-3015, proposed): the operator creates one Workload per TrainJob and one
    PodGroup per group, and every pod names its group. Either the TrainJob-level fields or `replicatedJobs`. Needs
    the operator's TrainJobWorkloadAwareScheduling feature gate; not together with `podGroupPolicy`."""

    scheduling_policy: PodGroupSchedulingPolicy | None = None
    """One group for every pod of the TrainJob (gang when unset and `replicatedJobs` is unset); a runtime whose
    replicated jobs wait for each other (`dependsOn`) gets one group per replicated job instead."""
    scheduling_constraints: PodGroupSchedulingConstraints | None = None
    """Placement constraints of the TrainJob-level group(s)."""
    disruption_mode: DisruptionMode | None = None
    """How the TrainJob-level group(s) are disrupted."""
    replicated_jobs: list[ReplicatedJobScheduling] | None = Field(
        default=None, max_length=8, json_schema_extra={"x-kubernetes-list-type": "atomic"}
    )
    """One group per entry, for the replicated jobs it names; every replicated job in exactly one entry."""


class RunPolicy(ApiModel):
    """Upstream's proposal (KEP-2899 update, T#3824/T#4052): lifecycle defaults for every TrainJob of the runtime;
    a TrainJob's own field overrides each."""

    active_deadline_seconds: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int64"})
    """Default of a TrainJob's spec.activeDeadlineSeconds: seconds it may run after its last start."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int32"})
    """Default of a TrainJob's spec.ttlSecondsAfterFinished: seconds after it finished that it is deleted."""
    startup_deadline_seconds: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int64"})
    """Beyond upstream: default of a TrainJob's spec.startupDeadlineSeconds: seconds its pods may stay unschedulable
    or without their image."""
    stall_policy: StallPolicy | None = None
    """Beyond upstream (issue 35): default of a TrainJob's spec.stallPolicy: when a TrainJob that stopped reporting
    progress is Stalled, and what is done about it."""


class TrainingRuntimeSpec(ApiModel):
    """The blueprint of a training job: framework, gang scheduling, run policy and the JobSet template."""

    model_config = {"json_schema_extra": {"minProperties": 1}}

    ml_policy: MLPolicy | None = None
    """The distributed training framework and the number of nodes."""
    pod_group_policy: PodGroupPolicy | None = None
    """Gang scheduling of the pods."""
    scheduling: Scheduling | None = None
    """Beyond upstream v2.4 (KEP-3015, proposed): gang scheduling by Kubernetes' own Workload API (1.37+), behind the
    operator's TrainJobWorkloadAwareScheduling feature gate; not together with `podGroupPolicy`."""
    run_policy: RunPolicy | None = None
    """Lifecycle defaults of the TrainJobs that use the runtime."""
    template: JobSetTemplateSpec = Field(json_schema_extra={"minProperties": 1})
    """The JobSet each TrainJob becomes, before the TrainJob's overrides."""


class TrainingRuntime(ApiModel):
    """A blueprint for TrainJobs of one namespace: framework, node count and the JobSet to run."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainingRuntime"] = c.TRAINING_RUNTIME_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec
    """The blueprint."""


class ClusterTrainingRuntime(ApiModel):
    """A blueprint for TrainJobs of every namespace: framework, node count and the JobSet to run."""

    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["ClusterTrainingRuntime"] = c.CLUSTER_TRAINING_RUNTIME_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec
    """The blueprint."""


AnyRuntime = TrainingRuntime | ClusterTrainingRuntime
RuntimeModels = tuple[type[TrainingRuntime], type[ClusterTrainingRuntime]]
"""The models a runtime object is parsed with: (TrainingRuntime, ClusterTrainingRuntime), the shipped ones or those a
registry's framework plugins extend (`with_ml_policy_sources`, `Framework.runtime_models`)."""
SHIPPED_MODELS: RuntimeModels = (TrainingRuntime, ClusterTrainingRuntime)


def runtime_model(
    kind: object, models: RuntimeModels = SHIPPED_MODELS
) -> type[TrainingRuntime] | type[ClusterTrainingRuntime]:
    """The model of a runtime object of `kind` among `models`: the TrainingRuntime one for that kind, else the
    ClusterTrainingRuntime one (the default kind of a `runtimeRef`; another kind fails the model's `kind` literal)."""
    training, cluster = models
    return training if kind == c.TRAINING_RUNTIME_KIND else cluster


def with_ml_policy_sources(sources: Mapping[str, type[ApiModel]]) -> RuntimeModels:
    """The runtime models with more framework sources under `spec.mlPolicy`, one optional field each (by Python
    name; a framework plugin's `ClaimsTrainer.policy_source`), and the one-of rule over all of them: what the CRDs
    and the parsing of a registry whose plugins bring their own sources are generated from."""
    if not sources:
        return SHIPPED_MODELS
    fields: dict[str, Any] = {name: (source | None, None) for name, source in sources.items()}
    policy = create_model("MLPolicy", __base__=MLPolicy, __module__=__name__, **fields)
    policy.model_config["json_schema_extra"] = x_validations(
        one_ml_policy((*ML_POLICIES, *(to_camel(name) for name in sources)))
    )
    spec = create_model(
        "TrainingRuntimeSpec", __base__=TrainingRuntimeSpec, __module__=__name__, ml_policy=(policy | None, None)
    )
    return (
        create_model("TrainingRuntime", __base__=TrainingRuntime, __module__=__name__, spec=(spec, ...)),
        create_model("ClusterTrainingRuntime", __base__=ClusterTrainingRuntime, __module__=__name__, spec=(spec, ...)),
    )
