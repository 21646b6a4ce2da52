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


@dataclass
class ObjectCache:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)

    def put(self, obj: dict[str, Any]) -> None:
        """Keep the newest version seen, whether it came from a watch event or an apply response."""
        key = key_of(obj)
        if _newer(self.objects.get(key), obj):
            self.objects[key] = obj

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
    jobsets: ObjectCache = field(default_factory=ObjectCache)
    runtimes: ObjectCache = field(default_factory=ObjectCache)
    cluster_runtimes: ObjectCache = field(default_factory=ObjectCache)
    known: Known = field(default_factory=Known)
