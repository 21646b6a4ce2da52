"""PlainML: trainer count and TrainJob env when no torch/mpi/jax policy is set (also beside xgboost/flux)."""

from typing import ClassVar

from ...api import constants as c
from ...api.trainjob import TrainJob
from ..framework import EnforceMLPolicy
from ..info import RuntimeInfo
from ..upsert import upsert_env
from .common import set_trainer_count


class PlainML(EnforceMLPolicy):
    name: ClassVar[str] = "PlainML"

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        policy = info.ml_policy
        if policy is not None and (policy.torch or policy.mpi or policy.jax):
            return
        set_trainer_count(info, job)
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        node = trainer.container(c.NODE) if trainer is not None else None
        if node is not None and job.spec.trainer is not None and job.spec.trainer.env:
            upsert_env(node, job.spec.trainer.env)
