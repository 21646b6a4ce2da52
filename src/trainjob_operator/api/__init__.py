"""Typed models (pydantic v2) of the Trainer v2 CRDs and the Kubernetes types they embed. No I/O."""

from .runtime import AnyRuntime, ClusterTrainingRuntime, TrainingRuntime, TrainingRuntimeSpec
from .trainjob import TrainJob, TrainJobSpec, TrainJobStatus

__all__ = [
    "AnyRuntime",
    "ClusterTrainingRuntime",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
]
