"""JAX: process count, process id and coordinator address for the trainer node container (spec §9.2)."""

from typing import ClassVar

from ...api import constants as c
from ...api.core import ContainerPort, EnvVar
from ...api.trainjob import TrainJob
from ..apply import upsert_env, upsert_port
from ..errors import Validation
from ..framework import CustomValidation, EnforceMLPolicy
from ..info import RuntimeInfo
from ..observed import Observed
from .common import completion_index_env, first_pod_address, set_trainer_count


class JAX(EnforceMLPolicy, CustomValidation):
    name: ClassVar[str] = "JAX"

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if info.ml_policy is None or info.ml_policy.jax is None:
            return
        set_trainer_count(info, job)
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        node = trainer.container(c.NODE) if trainer is not None else None
        if trainer is None or node is None or job.spec.trainer is None:
            return
        upsert_env(node, job.spec.trainer.env or [])
        upsert_env(node, [
            EnvVar(name=c.JAX_ENV_NUM_PROCESSES, value=str(trainer.count)),
            completion_index_env(c.JAX_ENV_PROCESS_ID),
            EnvVar(name=c.JAX_ENV_COORDINATOR_ADDRESS, value=f"{first_pod_address(job)}:{c.CONTAINER_TRAINER_PORT}"),
        ])
        upsert_port(node, ContainerPort(container_port=c.CONTAINER_TRAINER_PORT))

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        return Validation()
