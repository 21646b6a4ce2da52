"""In-memory views of the watched objects (an informer cache) and what the operator knows it created."""

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..api import constants as c
from ..codec import jsontext
from ..runtime.framework import ChildKind
from ..runtime.health import EVENT_KEYS_PER_TRAINJOB, pod_summary
from ..runtime.identity import same_incarnation
from ..runtime.info import RuntimeSource
from ..runtime.lifecycle import size_view
from ..runtime.observed import ObjectRef
from ..runtime.pipeline import Framework

Key = tuple[str, str]
"""(namespace, name)."""


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


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
        if "replicatedJobs" in keep_spec and "replicatedJobs" in spec:  # only the sizes (resize while suspended)
            slimmed["spec"]["replicatedJobs"] = size_view(spec["replicatedJobs"])
    return slimmed


@dataclass
class ObjectCache:
    """Objects by key, kept as compact JSON: a few KiB each instead of tens as Python dicts, so thousands of
    TrainJobs cost little memory; `get` decodes a fresh copy that callers may not share."""

    keep_spec: tuple[str, ...] | None = None
    """For caches of children: the only spec fields kept."""
    _data: dict[Key, bytes] = field(default_factory=dict)
    _versions: dict[Key, int] = field(default_factory=dict)

    def put(self, obj: dict[str, Any]) -> None:
        """Keep the newest version seen, whether it came from a watch event or an apply response."""
        key = key_of(obj)
        try:
            version = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
        except ValueError:
            version = 0
        if version and version < self._versions.get(key, 0):
            return
        self._versions[key] = version
        self._data[key] = jsontext.compact(slim(obj, self.keep_spec))

    def holds(self, obj: dict[str, Any]) -> bool:
        """This very version (key and resourceVersion) is cached already: an event of it brings nothing new."""
        version = (obj.get("metadata") or {}).get("resourceVersion")
        return bool(version) and str(self._versions.get(key_of(obj), "")) == str(version)

    def remove(self, key: Key) -> None:
        self._data.pop(key, None)
        self._versions.pop(key, None)

    def removed(self, obj: dict[str, Any]) -> bool:
        """A DELETED event: drop the cached object only if it is that incarnation (uid); True when dropped. The
        delete of a predecessor that arrives after its successor of the same name was cached leaves the successor."""
        key = key_of(obj)
        if not same_incarnation(self.get(key), obj):
            return False
        self.remove(key)
        return True

    def get(self, key: Key) -> dict[str, Any] | None:
        data = self._data.get(key)
        return jsontext.loads(data) if data is not None else None

    def snapshot_keys(self) -> list[Key]:
        return list(self._data)

    def values(self) -> Iterator[dict[str, Any]]:
        for data in list(self._data.values()):
            yield jsontext.loads(data)

    def __len__(self) -> int:
        return len(self._data)


@dataclass(slots=True)
class KnownJob:
    """What the operator remembers of one TrainJob incarnation (its uid) between passes: one record, so forgetting
    the TrainJob is one statement (`Known.forget`) and a new field cannot be left behind."""

    snapshot: RuntimeSource | None = None
    """The runtime snapshot in force."""
    snapshot_text: str | None = None
    """The snapshot text read back whose parsed runtime it shares (`Known.shared_source`; None: it shares none)."""
    existing: set[ObjectRef] = field(default_factory=set)
    """Children of tracked kinds (created once, or probed) known to exist."""
    applied: dict[ObjectRef, bytes] = field(default_factory=dict)
    """The body digests of the children (other than the JobSet) this process applied last (plan.unchanged)."""
    nodes: int | None = None
    """The node count of its last build."""
    last_error: str | None = None
    """The message of the last Event recorded for it (one Event per distinct failure or wait)."""
    jobset_made: bool = False
    """This process has made its JobSet once (the create-to-JobSet latency is observed once; a rebuild says so)."""
    started: bool = False
    """Its pods all started after its startup deadline was due: no more pod listings."""
    warned: set[str] = field(default_factory=set)
    """The keys of the pod Warning Events recorded (runtime/health.py), at most EVENT_KEYS_PER_TRAINJOB."""


@dataclass
class Known:
    """Per TrainJob uid: its `KnownJob` record; and the parsed runtimes of snapshot texts read back, shared."""

    jobs: dict[str, KnownJob] = field(default_factory=dict)
    """The one map keyed by uid."""
    shared_sources: dict[str, RuntimeSource] = field(default_factory=dict)
    """Per distinct runtime snapshot text read back: its parsed runtime, shared by the TrainJobs using it (one parse
    for a thousand TrainJobs of one runtime); dropped with the last of them (`forget`)."""
    source_users: dict[str, int] = field(default_factory=dict)
    """Per snapshot text: how many TrainJobs share its parsed runtime."""

    def get(self, uid: str) -> KnownJob | None:
        """What is remembered of `uid` (None: nothing; reading remembers nothing new)."""
        return self.jobs.get(uid)

    def of(self, uid: str) -> KnownJob:
        """The record of `uid`, made empty the first time something is remembered of it."""
        job = self.jobs.get(uid)
        if job is None:
            job = self.jobs[uid] = KnownJob()
        return job

    def forget(self, uid: str) -> None:
        """Everything remembered of `uid` goes (and its share of a parsed snapshot)."""
        job = self.jobs.pop(uid, None)
        if job is not None:
            self._release_source(job.snapshot_text)

    def shared_source(self, uid: str, text: str, fresh: RuntimeSource) -> RuntimeSource:
        """The one parsed runtime of snapshot `text` (`fresh` if none yet, or if the one kept names another runtime),
        recorded as the snapshot in force for `uid`."""
        shared = self.shared_sources.get(text)
        if shared is None or (shared.kind, shared.name) != (fresh.kind, fresh.name):
            shared = self.shared_sources[text] = fresh
        job = self.of(uid)
        if job.snapshot_text != text:
            self._release_source(job.snapshot_text)
            job.snapshot_text = text
            self.source_users[text] = self.source_users.get(text, 0) + 1
        job.snapshot = shared
        return shared

    def _release_source(self, text: str | None) -> None:
        if text is None:
            return
        users = self.source_users.get(text, 1) - 1
        if users > 0:
            self.source_users[text] = users
        else:
            self.source_users.pop(text, None)
            self.shared_sources.pop(text, None)

    def warn_once(self, uid: str, key: str) -> bool:
        """True the first time `key` is seen for this TrainJob (and while it has room for more keys)."""
        keys = self.of(uid).warned
        if key in keys or len(keys) >= EVENT_KEYS_PER_TRAINJOB:
            return False
        keys.add(key)
        return True

    def exists(self, uid: str) -> frozenset[ObjectRef]:
        job = self.jobs.get(uid)
        return frozenset(job.existing) if job is not None else frozenset()

    def add(self, uid: str, ref: ObjectRef) -> None:
        self.of(uid).existing.add(ref)


def _registry_kinds() -> list[ChildKind]:
    return Framework.from_registry().kinds()


def child_caches(kinds: list[ChildKind]) -> dict[tuple[str, str], ObjectCache]:
    """One cache per watched child kind, keeping only the spec fields the kind declares."""
    return {(k.api_version, k.kind): ObjectCache(keep_spec=k.cache_spec or None) for k in kinds if k.watch}


@dataclass
class PodCache:
    """The JobSets' pods, as `health.pod_summary` keeps them (a few hundred bytes each), indexed by JobSet name."""

    _data: dict[Key, bytes] = field(default_factory=dict)
    _by_jobset: dict[Key, set[str]] = field(default_factory=dict)

    @staticmethod
    def _jobset_of(summary: dict[str, Any]) -> Key:
        meta = summary["metadata"]
        return meta.get("namespace") or "", (meta.get("labels") or {}).get(c.JOBSET_NAME_LABEL) or ""

    def put(self, pod: dict[str, Any]) -> Key | None:
        """Keep the pod's summary; the JobSet's key when the summary changed (what the operator reads of a pod
        changed), None otherwise."""
        summary = pod_summary(pod)
        key = key_of(summary)
        data = jsontext.compact(summary)
        before = self._data.get(key)
        if before == data:
            return None
        owner = self._jobset_of(summary)
        if before is not None and key[1] not in self._by_jobset.get(owner, ()):
            # relabelled, or another pod of that name: listed under its JobSet only
            self._unindex(self._jobset_of(jsontext.loads(before)), key[1])
        self._data[key] = data
        self._by_jobset.setdefault(owner, set()).add(key[1])
        return owner

    def remove(self, pod: dict[str, Any]) -> Key | None:
        """A DELETED event: the cached pod goes only if it is that incarnation (uid)."""
        key = key_of(pod)
        data = self._data.get(key)
        if data is None:
            return None
        cached = jsontext.loads(data)
        if not same_incarnation(cached, pod):
            return None
        del self._data[key]
        owner = self._jobset_of(cached)
        self._unindex(owner, key[1])
        return owner

    def _unindex(self, owner: Key, name: str) -> None:
        names = self._by_jobset.get(owner)
        if names is not None:
            names.discard(name)
            if not names:
                del self._by_jobset[owner]

    def get(self, key: Key) -> dict[str, Any] | None:
        data = self._data.get(key)
        return jsontext.loads(data) if data is not None else None

    def snapshot_keys(self) -> list[Key]:
        return list(self._data)

    def count(self, key: Key) -> int:
        """How many pods of the JobSet `key` are cached."""
        return len(self._by_jobset.get(key, ()))

    def of_jobset(self, key: Key) -> list[dict[str, Any]]:
        """The pods labelled with this JobSet's name (the health check narrows them to the JobSet's uid)."""
        names = sorted(self._by_jobset.get(key, ()))
        return [jsontext.loads(self._data[(key[0], name)]) for name in names if (key[0], name) in self._data]

    def __len__(self) -> int:
        return len(self._data)


@dataclass
class Store:
    trainjobs: ObjectCache = field(default_factory=ObjectCache)
    runtimes: ObjectCache = field(default_factory=ObjectCache)
    cluster_runtimes: ObjectCache = field(default_factory=ObjectCache)
    known: Known = field(default_factory=Known)
    children: dict[tuple[str, str], ObjectCache] = field(default_factory=lambda: child_caches(_registry_kinds()))
    """Watched child kinds by (apiVersion, kind)."""
    pods: PodCache | None = None
    """The JobSets' pods, when the operator may watch pods (None: unknown, the Jobs' counts decide the state)."""

    @classmethod
    def for_kinds(cls, kinds: list[ChildKind]) -> "Store":
        return cls(children=child_caches(kinds))

    @property
    def jobsets(self) -> ObjectCache:
        """The JobSets: the child the status follows."""
        return self.children[(c.JOBSET_API_VERSION, c.JOBSET_KIND)]
