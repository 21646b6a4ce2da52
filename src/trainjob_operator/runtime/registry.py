"""The plugin registry: one list, in the fixed order every extension point runs them (the framework sorts each
plugin into the buckets of the extension points it implements and keeps this order inside each).

Upstream iterates a Go map (random order); we fix the order so output is deterministic
(docs/upstream-behaviour.md#plugin-order). Why each sits where it does:

1. PlainML, first: the trainer count and env when no framework claims the trainer.
2. The frameworks, Torch, MPI, JAX, XGBoost, Flux, then TensorFlow: the first of them that claims the trainer
   configures it (`ClaimsTrainer`); the ones with an `mlPolicy` source come before TensorFlow, which a runtime's
   label selects. Their env and objects are appended in this order.
3. The gang schedulers, CoScheduling, Volcano and WorkloadScheduling (Kubernetes' own Workload API, behind the
   TrainJobWorkloadAwareScheduling gate): they run after every ML policy (they count the pods the frameworks
   settled) and their PodGroups (and Workload) are written before the JobSet.
4. TrainJobStatus (the status server's endpoint on the trainer pods).
5. TrainerSplit (opt-in, issue 37): after every plugin that set the trainer's env from the completion index or
   counted its pods, it cuts the trainer into bounded Jobs and wraps its command to give the same variables the rank.
6. JobSet, last: its JobSet is written after every object its pods consume, and it is the status plugin.

A new plugin goes in this list, where its position says it runs (a framework among the frameworks).
"""

from collections.abc import Callable, Mapping
from functools import partial
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
from .plugins.trainer_split import TrainerSplit
from .plugins.trainjobstatus import TrainJobStatusBuilder
from .plugins.volcano import Volcano
from .plugins.workload import WorkloadScheduling
from .plugins.xgboost import XGBoost

Factory = Callable[[], Plugin]

ORDER: Final[tuple[type[Plugin], ...]] = (
    PlainML,
    Torch,
    MPI,
    JAX,
    XGBoost,
    Flux,
    TensorFlow,
    CoScheduling,
    Volcano,
    WorkloadScheduling,
    TrainJobStatusBuilder,
    TrainerSplit,
    JobSetPlugin,
)

PLUGINS: Final[dict[str, Factory]] = {plugin.name: plugin for plugin in ORDER}

GATED: Final[tuple[type[WorkloadScheduling], ...]] = (WorkloadScheduling,)
"""The plugins behind a feature gate of the operator (a `gate` class attribute): each is built with `enabled=` its
gate's value, off unless the config names it."""
GATES: Final[frozenset[str]] = frozenset(plugin.gate for plugin in GATED)
"""The operator's feature gates."""


def gated(gates: Mapping[str, bool]) -> dict[str, Factory]:
    """The registry with every gated plugin built with its gate's value from `gates`."""
    registry: dict[str, Factory] = dict(PLUGINS)
    for plugin in GATED:
        registry[plugin.name] = partial(plugin, enabled=bool(gates.get(plugin.gate, False)))
    return registry
