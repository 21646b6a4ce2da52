"""JAX: process count, process id and coordinator address for the trainer node container.

As upstream (docs/upstream-behaviour.md#other-frameworks), except that upstream's JAX plugin has a CustomValidation
that checks nothing; this one has none."""

from typing import ClassVar

from ...api import constants as c
from ...api.core import ContainerPort, EnvVar
from ...api.trainjob import TrainJob
from ..framework import ClaimsTrainer, EnforceMLPolicy
from ..info import RuntimeInfo
from ..upsert import upsert_env, upsert_port
from .common import completion_index_env, first_pod_address, set_trainer_count


class JAX(ClaimsTrainer, EnforceMLPolicy):
    name: ClassVar[str] = "JAX"

    def claims_trainer(self, info: RuntimeInfo) -> bool:
        return info.ml_policy is not None and info.ml_policy.jax is not None

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if info.ml_policy is None or info.ml_policy.jax is None:
            return
        set_trainer_count(info, job)
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        node = trainer.container(c.NODE) if trainer is not None else None
        if trainer is None or node is None or job.spec.trainer is None:
            return
        upsert_env(node, job.spec.trainer.env or [])
        upsert_env(
            node,
            [
                EnvVar(name=c.JAX_ENV_NUM_PROCESSES, value=str(trainer.count)),
                completion_index_env(c.JAX_ENV_PROCESS_ID),
                EnvVar(
                    name=c.JAX_ENV_COORDINATOR_ADDRESS, value=f"{first_pod_address(job)}:{c.CONTAINER_TRAINER_PORT}"
                ),
            ],
        )
        upsert_port(node, ContainerPort(container_port=c.CONTAINER_TRAINER_PORT))
