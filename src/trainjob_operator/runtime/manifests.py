"""Metadata shared by every object the operator emits: names, namespace and the controller owner reference."""

from typing import Any

from ..api import constants as c
from ..api.trainjob import TrainJob


def owner_reference(job: TrainJob) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "name": job.name,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    if job.metadata.uid:
        ref["uid"] = job.metadata.uid
    return ref


def owned_metadata(job: TrainJob, name: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": job.namespace}
    meta.update({k: v for k, v in extra.items() if v})
    meta["ownerReferences"] = [owner_reference(job)]
    return meta
