"""One abstract base per extension point (docs/upstream-behaviour.md#extension-points). Plugins subclass the points
they implement.

Phases: Startup (OwnsKinds: the child kinds a plugin writes, from which the shell derives watches, existence
tracking, the client's REST paths and the RBAC rules; DeclaresReads: what else the plugin needs to read, which the
shell reads and hands back in `Observed.reads`), PreExecution (CustomValidation), Build (ClaimsTrainer decides who
configures the trainer, then EnforceMLPolicy → EnforcePodGroupPolicy → EnforcePodSpec → ComponentBuilder) and
PostExecution (TrainJobStatusPlugin; RebuildsChild: whether a refused child may be deleted and made anew).
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from ..api.base import ApiModel
from ..api.trainjob import TrainJob, TrainJobStatus
from .errors import Validation
from .info import RuntimeInfo, RuntimeSource
from .observed import Observed, Read

Manifest = dict[str, Any]


class Plugin(ABC):
    name: ClassVar[str]


class Mode(StrEnum):
    """How the shell writes an object a builder emits."""

    APPLY = "apply"
    """Server-side apply (one field manager, forced): created or brought up to date on every build."""
    CREATE_ONCE = "create"
    """A plain create: a conflict means it exists, and it is never updated (immutable or generated once)."""


@dataclass(frozen=True)
class ChildKind:
    """A kind of object the operator writes for a TrainJob: how it is written, and what the shell derives from it
    (the REST path, a watch, existence tracking and the RBAC rule that grants it)."""

    api_version: str
    kind: str
    plural: str
    mode: Mode = Mode.APPLY
    """How the declaring plugin's objects of this kind are written."""
    probe: bool = False
    """Before the first write for a TrainJob the shell reads whether it exists already (a restarted operator does not
    re-create what the builder skips once it exists)."""
    watch: bool = False
    """Watched and cached: a change re-reconciles the TrainJob that controls the object."""
    cache_spec: tuple[str, ...] = ()
    """Of a watched kind: the only spec fields its cache keeps (empty: the whole object)."""
    optional: bool = False
    """Only some runtimes make it: a missing permission is a start-up warning, not a refusal to start."""
    purpose: str = ""
    """What it is for: the comment on its RBAC rule."""
    applied: bool = False
    """Another plugin declaring the same kind server-side applies its objects of it (set by `merge_kinds`): `patch`
    is then needed whatever this declaration's own mode."""

    @property
    def tracked(self) -> bool:
        """Its existence is remembered per TrainJob once written (the builder skips what exists)."""
        return self.mode is Mode.CREATE_ONCE or self.probe

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def verbs(self) -> tuple[str, ...]:
        """The requests the shell makes for it: get (probes, reads of whose an object is, read-through), create
        (server-side apply creates, and so does create once), patch (server-side apply only: a kind every plugin
        creates once, such as the key Secrets, is never patched), list and watch (watched kinds), delete (every
        kind: an object a previous TrainJob of the same name left under a child's name is deleted, only that
        incarnation; the JobSet also on deadlines and rebuilds)."""
        patch = ("patch",) if self.mode is Mode.APPLY or self.applied else ()
        return ("get", *(("list", "watch") if self.watch else ()), "create", *patch, "delete")


class OwnsKinds(Plugin):
    """Startup: the child kinds the plugin's builder emits. Everything the shell needs for a kind comes from here."""

    @abstractmethod
    def kinds(self) -> list[ChildKind]: ...


class DeclaresReads(Plugin):
    """Startup: objects the plugin's checks need that the operator does not write (say the PriorityClasses a
    runtime's pods name). The shell reads each declared `Read` before admission validation and hands the result
    back in `Observed.reads`, keyed by the same `Read` (None there: unknown, the check is skipped). The core never
    reads anything itself."""

    @abstractmethod
    def reads(self, job: TrainJob, runtime: RuntimeSource) -> list[Read]: ...


class ClaimsTrainer(Plugin):
    """Build: the framework plugin that configures the trainer. The first plugin in the registry's order that
    claims it owns the trainer (`RuntimeInfo.trainer_owner`); with no claim, PlainML sets the count and env."""

    policy_source: ClassVar[tuple[str, type[ApiModel]] | None] = None
    """A framework source of its own under `spec.mlPolicy` (Python name, model), from which the runtime models,
    their CRD schema and the one-of rule are generated (`Framework.runtime_models`); None: the API declares it, or
    a label selects the framework."""

    @abstractmethod
    def claims_trainer(self, info: RuntimeInfo) -> bool: ...


class RebuildsChild(Plugin):
    """PostExecution: of a child whose update the API server refused as immutable, whether it may be deleted and
    made anew (its builder knows when nothing is lost)."""

    @abstractmethod
    def rebuilds(self) -> tuple[str, str]:
        """The (apiVersion, kind) it judges."""

    @abstractmethod
    def rebuildable(self, obj: dict[str, Any] | None) -> bool: ...


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
