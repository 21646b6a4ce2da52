"""Admission handlers: parse the review, look the runtime up, run the core's validation, answer."""

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..api import constants as c
from ..api.trainjob import TrainJob
from ..k8s.client import KubeClient
from ..logs import get
from ..runtime.conditions import rfc3339
from ..runtime.defaulting import keep_newer_fields, stamp_patch_times
from ..runtime.info import RuntimeSource
from ..runtime.observed import Observed
from ..runtime.pipeline import Framework
from ..runtime.review import Review, review_runtime, review_trainjob, review_unparsed, reviewed, runtime_key
from ..runtime.validation import parse
from . import admissionserver, reads
from .admissionserver import AdmissionVerdict
from .runtimes import RuntimeResolver
from .store import Store

log = get("trainjob_operator.webhooks")


def verdict(review: Review) -> AdmissionVerdict:
    """The core's review as the AdmissionReview answer says it."""
    return AdmissionVerdict(allowed=review.allowed, message=review.message, warnings=review.warnings)


@dataclass
class Webhooks:
    framework: Framework
    runtimes: RuntimeResolver
    store: Store
    client: KubeClient
    clock: Callable[[], dt.datetime]

    def handlers(self) -> dict[str, admissionserver.Handler]:
        return {
            admissionserver.MUTATE_TRAINJOB: self.mutate_trainjob,
            admissionserver.VALIDATE_TRAINJOB: self.validate_trainjob,
            admissionserver.VALIDATE_RUNTIME: self.validate_training_runtime,
            admissionserver.VALIDATE_CLUSTER_RUNTIME: self.validate_cluster_training_runtime,
        }

    async def mutate_trainjob(self, review: dict[str, Any]) -> AdmissionVerdict:
        new, old = review.get("object") or {}, review.get("oldObject")
        update = review.get("operation") == "UPDATE"
        stamped = stamp_patch_times(new, old if update else None, rfc3339(self.clock()))
        ops = keep_newer_fields(
            new, old if update else None, full_update=(review.get("options") or {}).get("kind") == "UpdateOptions"
        )
        if stamped is not None:
            ops.append({"op": "replace", "path": "/spec/runtimePatches", "value": stamped})
        return AdmissionVerdict(patch=ops) if ops else AdmissionVerdict()

    async def validate_trainjob(self, review: dict[str, Any]) -> AdmissionVerdict:
        if not reviewed(c.TRAINJOB_KIND, review.get("operation")):
            return AdmissionVerdict()
        new, errors = parse(TrainJob, review.get("object"))
        if new is None:
            return verdict(review_unparsed(errors))
        old: TrainJob | None = None
        if review.get("operation") == "UPDATE":
            old, _ = parse(TrainJob, review.get("oldObject"))
        key = runtime_key(new)
        runtime: RuntimeSource | None = None
        if key is not None:
            try:
                runtime = await self.runtimes.lookup(key.kind, new.namespace, key.name)
            except ValidationError as err:
                return AdmissionVerdict(
                    allowed=False, message=f"spec.runtimeRef: the runtime {key.name} does not parse: {err}"
                )
        observed = Observed(
            jobset=self.store.jobsets.get((new.namespace, new.name)),
            reads=await reads.perform(self.client, self.framework.reads(new, runtime)),
        )
        return verdict(review_trainjob(self.framework, old, new, runtime, observed))

    async def _validate_runtime(self, review: dict[str, Any], kind: str) -> AdmissionVerdict:
        if not reviewed(kind, review.get("operation")):
            return AdmissionVerdict()
        runtime, errors = parse(self.framework.runtime_model(kind), review.get("object"))
        if runtime is None:
            return verdict(review_unparsed(errors))
        return verdict(review_runtime(runtime))

    async def validate_training_runtime(self, review: dict[str, Any]) -> AdmissionVerdict:
        return await self._validate_runtime(review, c.TRAINING_RUNTIME_KIND)

    async def validate_cluster_training_runtime(self, review: dict[str, Any]) -> AdmissionVerdict:
        return await self._validate_runtime(review, c.CLUSTER_TRAINING_RUNTIME_KIND)
