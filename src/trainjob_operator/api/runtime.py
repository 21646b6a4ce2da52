"""TrainingRuntime and ClusterTrainingRuntime: the blueprints platform admins publish."""

from typing import Literal

from pydantic import Field

from . import constants as c
from .base import ApiModel
from .core import ObjectMeta
from .jobset import JobSetTemplateSpec
from .rules import (
    ENV_INJECTION_NOT_NODE,
    FLUX_NUM_PROC_PER_NODE,
    MPI_NUM_PROC_PER_NODE,
    ONE_ML_POLICY,
    x_validations,
)


class EnvInjectionTarget(ApiModel):
    job_name: str = Field(min_length=1, max_length=253)
    container_names: list[str] = Field(
        min_length=1,
        max_length=8,
        json_schema_extra={
            "x-kubernetes-list-type": "set",
            "x-items": {"maxLength": 63},
            **x_validations(ENV_INJECTION_NOT_NODE),
        },
    )


class TorchEnvInjection(ApiModel):
    targets: list[EnvInjectionTarget] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["jobName"]},
    )


class TorchMLPolicySource(ApiModel):
    env_injection: TorchEnvInjection | None = None


class MPIMLPolicySource(ApiModel):
    num_proc_per_node: int | None = Field(default=1, json_schema_extra=x_validations(MPI_NUM_PROC_PER_NODE))
    mpi_implementation: Literal["OpenMPI", ""] | None = "OpenMPI"
    ssh_auth_mount_path: str | None = Field(default="/root/.ssh", max_length=4096)
    run_launcher_as_node: bool | None = False


class JAXMLPolicySource(ApiModel):
    pass


class XGBoostMLPolicySource(ApiModel):
    pass


class FluxMLPolicySource(ApiModel):
    num_proc_per_node: int | None = Field(default=1, json_schema_extra=x_validations(FLUX_NUM_PROC_PER_NODE))


class MLPolicy(ApiModel):
    model_config = {"json_schema_extra": x_validations(ONE_ML_POLICY)}

    num_nodes: int | None = None
    torch: TorchMLPolicySource | None = None
    mpi: MPIMLPolicySource | None = None
    jax: JAXMLPolicySource | None = None
    xgboost: XGBoostMLPolicySource | None = None
    flux: FluxMLPolicySource | None = None


class CoschedulingPodGroupPolicySource(ApiModel):
    schedule_timeout_seconds: int | None = 60


class VolcanoNetworkTopology(ApiModel):
    mode: Literal["hard", "soft"] | None = "hard"
    highest_tier_allowed: int | None = 1


class VolcanoPodGroupPolicySource(ApiModel):
    network_topology: VolcanoNetworkTopology | None = None


class PodGroupPolicy(ApiModel):
    coscheduling: CoschedulingPodGroupPolicySource | None = None
    volcano: VolcanoPodGroupPolicySource | None = None


class RunPolicy(ApiModel):
    """Upstream's proposal (KEP-2899 update, T#3824/T#4052): lifecycle defaults for every TrainJob of the runtime;
    a TrainJob's own field overrides each."""

    active_deadline_seconds: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int64"})
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int32"})
    startup_deadline_seconds: int | None = Field(default=None, ge=1, json_schema_extra={"format": "int64"})
    """Beyond upstream: see TrainJobSpec.startupDeadlineSeconds."""


class TrainingRuntimeSpec(ApiModel):
    model_config = {"json_schema_extra": {"minProperties": 1}}

    ml_policy: MLPolicy | None = None
    pod_group_policy: PodGroupPolicy | None = None
    run_policy: RunPolicy | None = None
    template: JobSetTemplateSpec = Field(json_schema_extra={"minProperties": 1})


class TrainingRuntime(ApiModel):
    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["TrainingRuntime"] = c.TRAINING_RUNTIME_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec


class ClusterTrainingRuntime(ApiModel):
    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = "trainer.kubeflow.org/v1alpha1"
    kind: Literal["ClusterTrainingRuntime"] = c.CLUSTER_TRAINING_RUNTIME_KIND
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TrainingRuntimeSpec


AnyRuntime = TrainingRuntime | ClusterTrainingRuntime


def runtime_model(kind: object) -> type[TrainingRuntime] | type[ClusterTrainingRuntime]:
    """The model of a runtime object of `kind`: a TrainingRuntime for that kind, else a ClusterTrainingRuntime (the
    default kind of a `runtimeRef`; another kind fails the model's `kind` literal)."""
    return TrainingRuntime if kind == c.TRAINING_RUNTIME_KIND else ClusterTrainingRuntime
