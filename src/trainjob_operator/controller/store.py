"""In-memory views of the watched objects (an informer cache) and what the operator knows it created."""

from dataclasses import dataclass, field
from typing import Any

from ..runtime.info import RuntimeSource

Key = tuple[str, str]
"""(namespace, name)."""


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def _newer(current: dict[str, Any] | None, candidate: dict[str, Any]) -> bool:
    if current is None:
        return True
    try:
        return int(candidate["metadata"]["resourceVersion"]) >= int(current["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return True


NOISE = ("managedFields",)
NOISY_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def slim(obj: dict[str, Any], keep_spec: tuple[str, ...] | None = None) -> dict[str, Any]:
    """What the operator needs of a cached object: managedFields and kubectl's copy of the object dropped, and for
    children (`keep_spec`) only the named spec fields. Thousands of cached objects stay small."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in NOISE}
    annotations = meta.get("annotations")
    if annotations and any(a in annotations for a in NOISY_ANNOTATIONS):
        meta["annotations"] = {k: v for k, v in annotations.items() if k not in NOISY_ANNOTATIONS}
    slimmed = {**obj, "metadata": meta}
    if keep_spec is not None:
        spec = obj.get("spec") or {}
        slimmed["spec"] = {k: spec[k] for k in keep_spec if k in spec}
    return slimmed


@dataclass
class ObjectCache:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    keep_spec: tuple[str, ...] | None = None
    """For caches of children: the only spec fields kept."""

    def put(self, obj: dict[str, Any]) -> None:
        """Keep the newest version seen, whether it came from a watch event or an apply response."""
        key = key_of(obj)
        if _newer(self.objects.get(key), obj):
            self.objects[key] = slim(obj, self.keep_spec)

    def remove(self, key: Key) -> None:
        self.objects.pop(key, None)

    def get(self, key: Key) -> dict[str, Any] | None:
        return self.objects.get(key)

    def __len__(self) -> int:
        return len(self.objects)


@dataclass
class Known:
    """Per TrainJob uid: the runtime snapshot in force and the children known to exist."""

    snapshots: dict[str, RuntimeSource] = field(default_factory=dict)
    mpi_secrets: set[str] = field(default_factory=set)
    pod_groups: set[str] = field(default_factory=set)
    last_error: dict[str, str] = field(default_factory=dict)
    created_seen: set[str] = field(default_factory=set)

    def forget(self, uid: str) -> None:
        self.snapshots.pop(uid, None)
        self.mpi_secrets.discard(uid)
        self.pod_groups.discard(uid)
        self.last_error.pop(uid, None)
        self.created_seen.discard(uid)


@dataclass
class Store:
    trainjobs: ObjectCache = field(default_factory=ObjectCache)
    jobsets: ObjectCache = field(default_factory=lambda: ObjectCache(keep_spec=("suspend", "volumeClaimPolicies")))
    runtimes: ObjectCache = field(default_factory=ObjectCache)
    cluster_runtimes: ObjectCache = field(default_factory=ObjectCache)
    known: Known = field(default_factory=Known)
