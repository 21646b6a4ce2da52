"""Typed models (pydantic v2) of the Trainer v2 CRDs and the Kubernetes types they embed. No I/O.

The models are imported when first named (`api.TrainJob`, `from trainjob_operator.api import TrainJob`), not with
the package: `api.constants`, `api.rules` and `api.legacy` are plain data that the CLI's flags and its input
reading need before (or without) any model, and building the models is most of a process's start-up.
"""

from importlib import import_module
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOME = MappingProxyType(
    {
        "AnyRuntime": "runtime",
        "ClusterTrainingRuntime": "runtime",
        "TrainingRuntime": "runtime",
        "TrainingRuntimeSpec": "runtime",
        "TrainJob": "trainjob",
        "TrainJobSpec": "trainjob",
        "TrainJobStatus": "trainjob",
    }
)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{home}", __name__), name)
