"""XGBoost: the DMLC tracker env; workers = nodes × GPUs per node (docs/upstream-behaviour.md#other-frameworks)."""

from typing import ClassVar

from ...api import constants as c
from ...api.core import ContainerPort, EnvVar
from ...api.trainjob import TrainJob
from ..errors import Validation, forbidden
from ..framework import ClaimsTrainer, CustomValidation, EnforceMLPolicy
from ..info import RuntimeInfo
from ..observed import Observed
from ..resources import gpu_count
from ..upsert import upsert_env, upsert_port
from .common import completion_index_env, decision_resources, first_pod_address, set_trainer_count


class XGBoost(ClaimsTrainer, EnforceMLPolicy, CustomValidation):
    name: ClassVar[str] = "XGBoost"

    def claims_trainer(self, info: RuntimeInfo) -> bool:
        return info.ml_policy is not None and info.ml_policy.xgboost is not None

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if info.ml_policy is None or info.ml_policy.xgboost is None:
            return
        set_trainer_count(info, job)
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        node = trainer.container(c.NODE) if trainer is not None else None
        if trainer is None or node is None or job.spec.trainer is None:
            return
        workers = trainer.count * max(gpu_count(decision_resources(info, job)), 1)
        upsert_env(node, job.spec.trainer.env or [])
        upsert_env(
            node,
            [
                EnvVar(name=c.XGBOOST_ENV_TRACKER_URI, value=first_pod_address(job)),
                EnvVar(name=c.XGBOOST_ENV_TRACKER_PORT, value=str(c.CONTAINER_TRAINER_PORT)),
                completion_index_env(c.XGBOOST_ENV_TASK_ID),
                EnvVar(name=c.XGBOOST_ENV_NUM_WORKER, value=str(workers)),
            ],
        )
        upsert_port(node, ContainerPort(container_port=c.CONTAINER_TRAINER_PORT))

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        if info.ml_policy is None or info.ml_policy.xgboost is None or new.spec.trainer is None:
            return Validation()
        return Validation(
            tuple(
                forbidden(f"spec.trainer.env[{i}]", f"{env.name} is reserved for the XGBoost runtime")
                for i, env in enumerate(new.spec.trainer.env or [])
                if env.name in c.XGBOOST_RESERVED_ENVS
            )
        )
