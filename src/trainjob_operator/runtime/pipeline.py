"""The framework: plugins sorted into one bucket per extension point, run in the documented order."""

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from pydantic.alias_generators import to_camel

from ..api.base import ApiModel
from ..api.rules import ML_POLICIES
from ..api.runtime import (
    ClusterTrainingRuntime,
    RunPolicy,
    RuntimeModels,
    TrainingRuntime,
    runtime_model,
    with_ml_policy_sources,
)
from ..api.trainjob import TrainJob
from .errors import BuildError, Validation, aggregate
from .framework import (
    ChildKind,
    ClaimsTrainer,
    ComponentBuilder,
    CustomValidation,
    DeclaresReads,
    EnforceMLPolicy,
    EnforcePodGroupPolicy,
    EnforcePodSpec,
    Manifest,
    Mode,
    OwnsKinds,
    Plugin,
    RebuildsChild,
    TrainJobStatusPlugin,
)
from .info import RuntimeInfo, RuntimeSource, new_runtime_info
from .limits import pod_name_errors, trainer_count_errors
from .observed import NOTHING, Observed, Read
from .registry import PLUGINS, Factory
from .snapshot import SNAPSHOT_KIND
from .status import StatusOutcome, desired_status


@dataclass(frozen=True)
class Framework:
    plugins: tuple[Plugin, ...]
    validators: tuple[CustomValidation, ...] = field(default=())
    ml_policies: tuple[EnforceMLPolicy, ...] = field(default=())
    pod_group_policies: tuple[EnforcePodGroupPolicy, ...] = field(default=())
    pod_specs: tuple[EnforcePodSpec, ...] = field(default=())
    builders: tuple[ComponentBuilder, ...] = field(default=())
    status_plugin: TrainJobStatusPlugin | None = None
    owners: tuple[OwnsKinds, ...] = field(default=())
    readers: tuple[DeclaresReads, ...] = field(default=())
    claimants: tuple[ClaimsTrainer, ...] = field(default=())
    rebuilders: tuple[RebuildsChild, ...] = field(default=())

    @classmethod
    def from_registry(cls, registry: dict[str, Factory] | None = None) -> "Framework":
        plugins = tuple(factory() for factory in (registry if registry is not None else PLUGINS).values())
        statuses = [p for p in plugins if isinstance(p, TrainJobStatusPlugin)]
        if len(statuses) > 1:
            raise ValueError("too many TrainJobStatus plugins are registered")
        return cls(
            plugins=plugins,
            validators=tuple(p for p in plugins if isinstance(p, CustomValidation)),
            ml_policies=tuple(p for p in plugins if isinstance(p, EnforceMLPolicy)),
            pod_group_policies=tuple(p for p in plugins if isinstance(p, EnforcePodGroupPolicy)),
            pod_specs=tuple(p for p in plugins if isinstance(p, EnforcePodSpec)),
            builders=tuple(p for p in plugins if isinstance(p, ComponentBuilder)),
            status_plugin=statuses[0] if statuses else None,
            owners=tuple(p for p in plugins if isinstance(p, OwnsKinds)),
            readers=tuple(p for p in plugins if isinstance(p, DeclaresReads)),
            claimants=tuple(p for p in plugins if isinstance(p, ClaimsTrainer)),
            rebuilders=tuple(p for p in plugins if isinstance(p, RebuildsChild)),
        )

    def reads(self, job: TrainJob, runtime: RuntimeSource | None) -> list[Read]:
        """What the plugins need read for admitting `job` against `runtime`, once each, in registry order (the shell
        reads them and hands the results back in `Observed.reads`)."""
        if runtime is None:
            return []
        return list(dict.fromkeys(read for reader in self.readers for read in reader.reads(job, runtime)))

    def policy_sources(self) -> dict[str, type[ApiModel]]:
        """The `mlPolicy` sources the framework plugins bring themselves, by Python name."""
        return dict(p.policy_source for p in self.claimants if p.policy_source is not None)

    def runtime_models(self) -> RuntimeModels:
        """The runtime models with those sources (the shipped API's when no plugin brings one): what every
        TrainingRuntime and ClusterTrainingRuntime is parsed with (webhook, controller, snapshot, offline CLI) and
        what `make crds` generates the CRDs from."""
        return self._runtime_models

    def runtime_model(self, kind: object) -> type[TrainingRuntime] | type[ClusterTrainingRuntime]:
        """The model of a runtime object of `kind` (`api.runtime.runtime_model`'s rule) among `runtime_models()`."""
        return runtime_model(kind, self._runtime_models)

    def one_ml_policy_sources(self) -> tuple[str, ...]:
        """The wire names of every `mlPolicy` framework source, of which a runtime may set one (the CEL twin's)."""
        return self._one_ml_policy_sources

    @cached_property
    def _runtime_models(self) -> RuntimeModels:
        """Made once per framework: models made anew per parse would cost pydantic's schema build each time."""
        return with_ml_policy_sources(self.policy_sources())

    @cached_property
    def _one_ml_policy_sources(self) -> tuple[str, ...]:
        return (*ML_POLICIES, *(to_camel(name) for name in self.policy_sources()))

    def claim_trainer(self, info: RuntimeInfo) -> RuntimeInfo:
        """Who configures the trainer: the first plugin, in registry order, that claims it (None: no framework
        does, and PlainML sets the count and env)."""
        info.trainer_owner = next((p.name for p in self.claimants if p.claims_trainer(info)), None)
        return info

    def rebuildable(self, api_version: str, kind: str, obj: dict[str, Any] | None) -> bool:
        """Whether the plugin that judges this kind says a refused `obj` may be deleted and made anew (no plugin:
        never)."""
        return any(r.rebuilds() == (api_version, kind) and r.rebuildable(obj) for r in self.rebuilders)

    def runtime_info(
        self, job: TrainJob, runtime: RuntimeSource, observed: Observed = NOTHING, info: RuntimeInfo | None = None
    ) -> RuntimeInfo:
        """Build phase, in this order: runtime patches and resources → ML policy → pod group policy → pod spec.
        `info`: `new_runtime_info(job, runtime)` when the caller made it already (for `validate`, whose validators
        only read it); it is enforced in place."""
        try:
            info = self.claim_trainer(info if info is not None else new_runtime_info(job, runtime))
            too_many = trainer_count_errors(info, job)
            if too_many:  # before any plugin makes something per node
                raise BuildError(aggregate(too_many))
            for ml in self.ml_policies:
                ml.enforce_ml_policy(info, job)
            for pod_group in self.pod_group_policies:
                pod_group.enforce_pod_group_policy(info, job)
            for pod_spec in self.pod_specs:
                pod_spec.enforce_pod_spec(info, job, observed)
            too_long = pod_name_errors(info, job, enforced=True)
            if too_long:  # JobSet would refuse it: say so naming the field, as admission does
                raise BuildError(aggregate(too_long))
        except (ValueError, ArithmeticError) as err:  # a quantity or number the plugins cannot compute with
            if isinstance(err, BuildError):
                raise
            raise BuildError(str(err)) from err
        return info

    def desired_objects(
        self, job: TrainJob, runtime: RuntimeSource, observed: Observed = NOTHING, info: RuntimeInfo | None = None
    ) -> list[Manifest]:
        """Every object to write for `job`, in write order (`info` as for `runtime_info`). Raises BuildError."""
        return [obj for obj, _ in self.build(self.runtime_info(job, runtime, observed, info), job, observed)]

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[tuple[Manifest, Mode]]:
        """The builders' objects, each with how it is written (its builder's declaration of the kind; a kind it
        does not declare is applied). Raises BuildError."""
        objects: list[tuple[Manifest, Mode]] = []
        try:
            for builder, modes in zip(self.builders, self._modes, strict=True):
                objects += [
                    (obj, modes.get((obj["apiVersion"], obj["kind"]), Mode.APPLY))
                    for obj in builder.build(info, job, observed)
                ]
        except (ValueError, ArithmeticError) as err:
            if isinstance(err, BuildError):
                raise
            raise BuildError(str(err)) from err
        return objects

    def validate(
        self,
        old: TrainJob | None,
        new: TrainJob,
        runtime: RuntimeSource,
        observed: Observed = NOTHING,
        info: RuntimeInfo | None = None,
    ) -> Validation:
        """PreExecution: every plugin's checks against the patched template (no ML plugins run), aggregated.
        Validators read the info and never change it (only who owns the trainer is settled on it first), so a caller
        may hand over `new_runtime_info(new, runtime)` as `info` and build from it afterwards (the offline CLI makes
        it once per TrainJob)."""
        if info is None:
            try:
                info = new_runtime_info(new, runtime)
            except (BuildError, ValueError) as err:
                from .errors import invalid

                return Validation((invalid("spec.runtimePatches", None, str(err)),))
        self.claim_trainer(info)
        result = Validation(tuple(trainer_count_errors(info, new) + pod_name_errors(info, new, enforced=False)))
        if result.errors:  # the plugins' own size checks assume a count within the Job's limit
            return result
        for validator in self.validators:
            found = validator.validate(info, old, new, observed)
            if found.errors or found.warnings:  # most validators find nothing: no new tuples then
                result += found
        return result

    def status(
        self, job: TrainJob, observed: Observed, now: datetime, policy: RunPolicy | None = None
    ) -> StatusOutcome:
        """PostExecution: the status plugin's view, then the Suspended condition, the timers of the effective run
        `policy` (None: the TrainJob's own fields only) and the lifecycle times."""
        if self.status_plugin is None:
            raise ValueError("no TrainJobStatus plugin is registered")
        return desired_status(job, self.status_plugin.status(job, observed, now), now, policy)

    @cached_property
    def _modes(self) -> tuple[dict[tuple[str, str], Mode], ...]:
        """Per builder: how it writes each kind it declares."""
        return tuple(
            {(k.api_version, k.kind): k.mode for k in builder.kinds()} if isinstance(builder, OwnsKinds) else {}
            for builder in self.builders
        )

    @cached_property
    def _kinds(self) -> tuple[ChildKind, ...]:
        return tuple(merge_kinds([SNAPSHOT_KIND, *(k for owner in self.owners for k in owner.kinds())]))

    def kinds(self) -> list[ChildKind]:
        """Every child kind the plugins declare, once per (apiVersion, kind), in registry order (the snapshot
        ConfigMap the core writes first): the source of the watches, the tracked kinds, the client's REST paths, the
        start-up permission checks and the chart's RBAC."""
        return list(self._kinds)

    def watched(self) -> list[ChildKind]:
        return [k for k in self.kinds() if k.watch]

    def kind(self, api_version: str, kind: str) -> ChildKind | None:
        return next((k for k in self.kinds() if (k.api_version, k.kind) == (api_version, kind)), None)


def merge_kinds(kinds: Iterable[ChildKind]) -> list[ChildKind]:
    """One entry per (apiVersion, kind): a kind two plugins declare is watched or probed if either says
    so, and optional only if both do (how each plugin writes its own objects stays with that plugin)."""
    merged: dict[tuple[str, str], ChildKind] = {}
    for k in kinds:
        seen = merged.get((k.api_version, k.kind))
        if seen is None:
            merged[(k.api_version, k.kind)] = k
            continue
        merged[(k.api_version, k.kind)] = replace(
            seen,
            probe=seen.probe or k.probe,
            watch=seen.watch or k.watch,
            optional=seen.optional and k.optional,
            cache_spec=seen.cache_spec or k.cache_spec,
            purpose="; ".join(p for p in (seen.purpose, k.purpose) if p),
            applied=seen.applied or k.applied or Mode.APPLY in (seen.mode, k.mode),
        )
    return list(merged.values())
