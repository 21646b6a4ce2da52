"""One abstract base per extension point (docs/upstream-behaviour.md#extension-points). Plugins subclass the points
they implement.

Phases: Startup (WatchExtension), PreExecution (CustomValidation), Build (EnforceMLPolicy →
EnforcePodGroupPolicy → EnforcePodSpec → ComponentBuilder) and PostExecution (TrainJobStatusPlugin).
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from ..api.trainjob import TrainJob, TrainJobStatus
from .errors import Validation
from .info import RuntimeInfo
from .observed import Observed

Manifest = dict[str, Any]


class Plugin(ABC):
    name: ClassVar[str]


@dataclass(frozen=True)
class WatchSpec:
    """A kind the controller must watch so changes of owned objects re-reconcile their TrainJob."""

    api_version: str
    kind: str
    owned: bool = True


class WatchExtension(Plugin):
    @abstractmethod
    def watches(self) -> list[WatchSpec]: ...


class CustomValidation(Plugin):
    @abstractmethod
    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation: ...


class EnforceMLPolicy(Plugin):
    @abstractmethod
    def enforce_ml_policy(self, info: RuntimeInfo, job: TrainJob) -> None: ...


class EnforcePodGroupPolicy(Plugin):
    @abstractmethod
    def enforce_pod_group_policy(self, info: RuntimeInfo, job: TrainJob) -> None: ...


class EnforcePodSpec(Plugin):
    """Pod-spec concerns that are no ML or gang policy (upstream HEAD's point of the same name); it runs after the
    pod group policies and sees what the shell observed (the status server's endpoint)."""

    @abstractmethod
    def enforce_pod_spec(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> None: ...


class ComponentBuilder(Plugin):
    @abstractmethod
    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]: ...


class TrainJobStatusPlugin(Plugin):
    @abstractmethod
    def status(self, job: TrainJob, observed: Observed, now: datetime) -> TrainJobStatus: ...
