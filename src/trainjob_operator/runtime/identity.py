"""Identity is the uid: which objects under a TrainJob's child names are this TrainJob's, and what becomes of the
others (docs/architecture.md, "Identity is the uid").

A TrainJob deleted and created again under its name leaves children that the garbage collector removes later; until
then they carry the new TrainJob's names. An object counts as a TrainJob's child only when its controller
ownerReference names that TrainJob's uid. Any other object under a child's name is a *stranger*: never read for the
status, never adopted, never patched. A stranger controlled by a TrainJob of the same name and another uid belongs to
a predecessor, which is certainly gone (the API server holds one object per name, and this TrainJob holds the name;
a uid never comes back), so it is deleted at once (only that incarnation: a uid precondition) and the new TrainJob
waits for it to go. A stranger controlled by anything else is left alone and the TrainJob waits, saying so.
"""

from dataclasses import dataclass
from typing import Any

from ..api import constants as c
from ..api.trainjob import TrainJob
from .observed import ObjectRef

WAIT_FIRST_SECONDS = 0.5
"""The first look again after a wait began (the garbage collector usually removes a child within a second)."""
WAIT_LONGEST_SECONDS = 30.0
"""The longest pause between looks: the wait backs off to it (half the time waited so far)."""
WAIT_NOTICE_SECONDS = 120.0
"""After this long the condition and a Warning Event say the garbage collector has not removed the objects."""


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with `controller: true`, if any."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((o for o in owners if isinstance(o, dict) and o.get("controller")), None)


def owned_by(job: TrainJob, obj: dict[str, Any] | None) -> bool:
    """`obj` is this TrainJob's child: its controller ownerReference is a TrainJob with this TrainJob's uid."""
    if obj is None or not job.metadata.uid:
        return False
    owner = controller_of(obj)
    return owner is not None and owner.get("kind") == c.TRAINJOB_KIND and owner.get("uid") == job.metadata.uid


def own(job: TrainJob, obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """`obj` when it is this TrainJob's child, else None: what the status and the builders may read."""
    return obj if owned_by(job, obj) else None


@dataclass(frozen=True)
class Stranger:
    """An object under one of a TrainJob's child names that is not that TrainJob's."""

    ref: ObjectRef
    uid: str
    """The object's own uid: a delete names only this incarnation."""
    owner: str
    """Its controller, as `Kind name (uid …)`, or `no controller`."""
    predecessor: bool
    """Controlled by a TrainJob of the same name and another uid: a predecessor, certainly gone."""
    deleting: bool
    """It has a deletionTimestamp already."""

    def describe(self, namespace: str) -> str:
        return f"{self.ref.kind} {namespace}/{self.ref.name} (controlled by {self.owner})"


def stranger(job: TrainJob, obj: dict[str, Any] | None) -> Stranger | None:
    """None when `obj` is absent or is this TrainJob's child; else what the TrainJob must wait for."""
    if obj is None or owned_by(job, obj):
        return None
    meta = obj.get("metadata") or {}
    owner = controller_of(obj)
    predecessor = (
        owner is not None
        and owner.get("kind") == c.TRAINJOB_KIND
        and str(owner.get("apiVersion", "")).split("/")[0] == c.GROUP
        and owner.get("name") == job.name
        and meta.get("namespace", job.namespace) == job.namespace
        and bool(owner.get("uid"))
        and owner.get("uid") != job.metadata.uid
    )
    described = (
        f"{owner.get('kind')} {owner.get('name')!r} (uid {owner.get('uid')})" if owner is not None else "no controller"
    )
    return Stranger(
        ObjectRef(str(obj.get("apiVersion", "")), str(obj.get("kind", "")), str(meta.get("name", ""))),
        str(meta.get("uid") or ""),
        described,
        predecessor,
        bool(meta.get("deletionTimestamp")),
    )


def wait_seconds(waited: float) -> float:
    """When to look again, `waited` seconds into a wait: backing off from WAIT_FIRST_SECONDS to
    WAIT_LONGEST_SECONDS (the deletes' watch events, for the JobSet, usually come sooner)."""
    return min(max(waited / 2, WAIT_FIRST_SECONDS), WAIT_LONGEST_SECONDS)


def same_incarnation(cached: dict[str, Any] | None, event_object: dict[str, Any]) -> bool:
    """A DELETED event removes a cached object only when it is the same incarnation (uid): the delete of a
    predecessor arriving after its successor was cached must not drop the successor."""
    if cached is None:
        return False
    cached_uid = (cached.get("metadata") or {}).get("uid")
    event_uid = (event_object.get("metadata") or {}).get("uid")
    return not cached_uid or not event_uid or cached_uid == event_uid
