"""Admission handlers: parse the review, look the runtime up, run the core's validation, answer."""

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..api import constants as c
from ..api.runtime import ClusterTrainingRuntime, TrainingRuntime
from ..api.trainjob import TrainJob
from ..k8s.client import Client
from ..logs import get
from ..runtime.conditions import rfc3339
from ..runtime.defaulting import keep_newer_fields, stamp_patch_times
from ..runtime.errors import aggregate
from ..runtime.info import RuntimeSource
from ..runtime.observed import Observed
from ..runtime.pipeline import Framework
from ..runtime.validation import admit_runtime, admit_trainjob, parse
from . import admission, reads
from .admission import Verdict
from .runtimes import RuntimeResolver
from .store import Store

log = get("trainjob_operator.webhooks")


def _deny_schema(errors: list[Any]) -> Verdict:
    return Verdict(allowed=False, message=aggregate(errors))


@dataclass
class Webhooks:
    framework: Framework
    runtimes: RuntimeResolver
    store: Store
    client: Client
    clock: Callable[[], dt.datetime]

    def handlers(self) -> dict[str, admission.Handler]:
        return {
            admission.MUTATE_TRAINJOB: self.mutate_trainjob,
            admission.VALIDATE_TRAINJOB: self.validate_trainjob,
            admission.VALIDATE_RUNTIME: self.validate_training_runtime,
            admission.VALIDATE_CLUSTER_RUNTIME: self.validate_cluster_training_runtime,
        }

    async def mutate_trainjob(self, review: dict[str, Any]) -> Verdict:
        new, old = review.get("object") or {}, review.get("oldObject")
        update = review.get("operation") == "UPDATE"
        stamped = stamp_patch_times(new, old if update else None, rfc3339(self.clock()))
        ops = keep_newer_fields(
            new, old if update else None, full_update=(review.get("options") or {}).get("kind") == "UpdateOptions"
        )
        if stamped is not None:
            ops.append({"op": "replace", "path": "/spec/runtimePatches", "value": stamped})
        return Verdict(patch=ops) if ops else Verdict()

    async def validate_trainjob(self, review: dict[str, Any]) -> Verdict:
        if review.get("operation") not in ("CREATE", "UPDATE"):
            return Verdict()
        new, errors = parse(TrainJob, review.get("object"))
        if new is None:
            return _deny_schema(errors)
        old: TrainJob | None = None
        if review.get("operation") == "UPDATE":
            old, _ = parse(TrainJob, review.get("oldObject"))
        ref = new.spec.runtime_ref
        runtime: RuntimeSource | None = None
        if ref.api_group == c.GROUP and ref.kind in c.RUNTIME_KINDS:
            try:
                runtime = await self.runtimes.lookup(ref.kind or "", new.namespace, ref.name)
            except ValidationError as err:
                return Verdict(allowed=False, message=f"spec.runtimeRef: the runtime {ref.name} does not parse: {err}")
        observed = Observed(
            jobset=self.store.jobsets.get((new.namespace, new.name)),
            reads=await reads.perform(self.client, self.framework.reads(new, runtime)),
        )
        result = admit_trainjob(self.framework, old, new, lambda *_: runtime, observed)
        if result.errors:
            return Verdict(allowed=False, message=aggregate(list(result.errors)), warnings=result.warnings)
        return Verdict(warnings=result.warnings)

    async def _validate_runtime(
        self, review: dict[str, Any], model: type[TrainingRuntime] | type[ClusterTrainingRuntime]
    ) -> Verdict:
        runtime, errors = parse(model, review.get("object"))
        if runtime is None:
            return _deny_schema(errors)
        result = admit_runtime(runtime)
        if result.errors:
            return Verdict(allowed=False, message=aggregate(list(result.errors)), warnings=result.warnings)
        return Verdict(warnings=result.warnings)

    async def validate_training_runtime(self, review: dict[str, Any]) -> Verdict:
        # Upstream validates TrainingRuntimes on CREATE only (docs/upstream-behaviour.md#webhooks).
        if review.get("operation") != "CREATE":
            return Verdict()
        return await self._validate_runtime(review, TrainingRuntime)

    async def validate_cluster_training_runtime(self, review: dict[str, Any]) -> Verdict:
        if review.get("operation") not in ("CREATE", "UPDATE"):
            return Verdict()
        return await self._validate_runtime(review, ClusterTrainingRuntime)
