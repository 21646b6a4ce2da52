"""PlainML: the trainer count and the TrainJob's env when no framework plugin claims the trainer
(`ClaimsTrainer`)."""

from typing import ClassVar

from ...api.trainjob import TrainJob
from ..framework import EnforceMLPolicy
from ..info import RuntimeInfo
from .common import plain_trainer


class PlainML(EnforceMLPolicy):
    name: ClassVar[str] = "PlainML"

    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if info.trainer_owner is None:
            plain_trainer(info, job)
