"""The plugin registry: name → factory, in the fixed order every extension point runs them.

Upstream iterates a Go map (random order); we fix the order so output is deterministic
(docs/upstream-behaviour.md#plugin-order).
"""

from collections.abc import Callable
from typing import Final

from .framework import Plugin
from .plugins.coscheduling import CoScheduling
from .plugins.flux import Flux
from .plugins.jax import JAX
from .plugins.jobset import JobSetPlugin
from .plugins.mpi import MPI
from .plugins.plainml import PlainML
from .plugins.tensorflow import TensorFlow
from .plugins.torch import Torch
from .plugins.trainjobstatus import TrainJobStatus
from .plugins.volcano import Volcano
from .plugins.xgboost import XGBoost

Factory = Callable[[], Plugin]

PLUGINS: Final[dict[str, Factory]] = {
    PlainML.name: PlainML,
    Torch.name: Torch,
    MPI.name: MPI,
    JAX.name: JAX,
    XGBoost.name: XGBoost,
    Flux.name: Flux,
    TensorFlow.name: TensorFlow,
    CoScheduling.name: CoScheduling,
    Volcano.name: Volcano,
    TrainJobStatus.name: TrainJobStatus,
    JobSetPlugin.name: JobSetPlugin,
}
