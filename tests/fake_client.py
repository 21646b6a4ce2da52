"""The one fake Kubernetes client of the unit tests: an in-memory API that implements `k8s.client.KubeClient`.

Objects are kept by (apiVersion, kind, namespace, name) with a uid and a resourceVersion; `apply` merges into what is
stored (maps merge, lists and scalars replace: enough server-side apply for the tests), `create` refuses what exists
(409), `patch` takes a merge patch or a JSON patch whose `test` fails with a bare 422 as the API server's does,
`delete` honours its uid/resourceVersion preconditions. Every call is recorded in `calls` as a short tuple:

    ("get", kind, name)                       ("list", kind, namespace, label_selector)
    ("apply", kind, name)                     ("create", kind, name)
    ("replace", kind, name, resource_version_sent)
    ("patch", kind, name, as_merge_patch)     ("delete", kind, name, propagation, uid[, resource_version])
    ("request", method, path)                 ("stream", path, params)

Errors are injected with `fail(verb, error, kind=..., times=...)`; `on_call` runs after each call is recorded (to
change the world mid-pass). Raw `request`s are answered from `responses` by (method, path), `stream_lines` from
`lines`. It speaks no HTTP: code that does (the client itself, kopf's watches) runs against `tests/fake_apiserver.py`.
"""

import asyncio
import copy
import ssl
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from trainjob_operator.k8s.client import BUILTIN, JSON_PATCH, ApiError, KubeClient, RESTMapper
from trainjob_operator.k8s.connection import Connection

Key = tuple[str, str, str | None, str]
"""(apiVersion, kind, namespace, name)."""
Call = tuple[Any, ...]


def key_of(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("namespace"), meta.get("name", ""))


def merged(base: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386): maps merge, None removes, anything else replaces."""
    if not isinstance(patch, dict) or not isinstance(base, dict):
        return copy.deepcopy(patch)
    out = dict(base)
    for name, value in patch.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = merged(base.get(name), value)
    return out


def as_merge_patch(operations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a JSON patch's add/replace/remove operations change, written as the merge patch that does the same."""
    out: dict[str, Any] = {}
    for operation in operations:
        if operation["op"] == "test":
            continue
        *parents, leaf = operation["path"].lstrip("/").split("/")
        target = out
        for name in parents:
            target = target.setdefault(name, {})
        target[leaf] = None if operation["op"] == "remove" else operation.get("value")
    return out


def _step(value: Any, part: str) -> Any:
    if isinstance(value, list):
        return value[int(part)] if part.isdigit() and int(part) < len(value) else None
    return value.get(part) if isinstance(value, dict) else None


def through_list(obj: Any, operations: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an operation's path goes through a list of `obj` (an index: `/spec/replicatedJobs/1/...`)."""
    for operation in operations:
        value = obj
        for part in operation["path"].lstrip("/").split("/")[:-1]:
            value = _step(value, part)
            if isinstance(value, list):
                return True
    return False


def parents_exist(obj: Any, operations: Sequence[Mapping[str, Any]]) -> bool:
    """Whether every operation's parent path is in `obj` (`/status/goodput` of an object with a status)."""
    for operation in operations:
        if operation["op"] == "test":
            continue
        value = obj
        for part in operation["path"].lstrip("/").split("/")[:-1]:
            value = _step(value, part)
            if value is None:
                return False
    return True


def applied_json_patch(obj: Any, operations: Sequence[Mapping[str, Any]]) -> Any:
    """`operations` (replace/add of existing parents) applied to a copy of `obj`, list indexes included."""
    out = copy.deepcopy(obj)
    for operation in operations:
        if operation["op"] == "test":
            continue
        *parents, leaf = operation["path"].lstrip("/").split("/")
        target = out
        for part in parents:
            target = _step(target, part)
        if isinstance(target, list):
            target[int(leaf)] = copy.deepcopy(operation.get("value"))
        elif operation["op"] == "remove":
            target.pop(leaf, None)
        else:
            target[leaf] = copy.deepcopy(operation.get("value"))
    return out


def as_sent(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A stored object without what the fake API added (uid, resourceVersion): what the caller sent."""
    if obj is None:
        return None
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("uid", "resourceVersion")}
    return {**obj, "metadata": meta}


def matches(labels: Mapping[str, str], selector: str | None) -> bool:
    """Equality selectors only (`a=b,c=d`): what the operator sends."""
    if not selector:
        return True
    for term in selector.split(","):
        name, _, value = term.partition("=")
        if labels.get(name) != value:
            return False
    return True


@dataclass
class Failure:
    verb: str
    error: BaseException
    kind: str | None = None
    times: int | None = None
    """How many calls it fails (None: every one)."""


@dataclass
class FakeClient:
    mapper: RESTMapper = BUILTIN
    connection: Connection = field(
        default_factory=lambda: Connection("https://127.0.0.1:6443", ssl.create_default_context(), source="fake")
    )
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    responses: dict[tuple[str, str], Any] = field(default_factory=dict)
    """Raw requests' answers by (method, path); an exception is raised; a missing one is a 404."""
    lines: list[bytes] = field(default_factory=list)
    """What `stream_lines` answers (a watch, a log)."""
    stream_hangs: bool = False
    """After `lines`, the stream stays open and silent (a server that never answers)."""
    on_call: Callable[[Call], None] | None = None
    """Called with each call once it is recorded, before any injected failure: to change the world mid-pass."""

    # --- test-side helpers ---------------------------------------------------------------------------------------

    def put(self, *objs: Mapping[str, Any]) -> "FakeClient":
        """Store objects as another writer would (a uid added when missing; the resourceVersion given or "1" for a
        new object, the next one for an object stored already)."""
        for obj in objs:
            stored = copy.deepcopy(dict(obj))
            meta = stored.setdefault("metadata", {})
            existing = self.objects.get(key_of(stored))
            if "uid" not in meta:
                meta["uid"] = existing["metadata"]["uid"] if existing is not None else self._fresh_uid(stored["kind"])
            if existing is not None:
                meta["resourceVersion"] = self._next(existing)
            meta.setdefault("resourceVersion", "1")
            self.objects[key_of(stored)] = stored
        return self

    def stored(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object as the fake API holds it now (not a copy)."""
        return self.objects.get((api_version, kind, namespace, name))

    def fail(self, verb: str, error: BaseException, kind: str | None = None, times: int | None = None) -> "FakeClient":
        """The next `times` calls (None: all) of `verb` ("get", "apply", "stream", ...), of `kind` when given, raise
        `error`; failures queued for the same calls take turns in the order given."""
        self.failures.append(Failure(verb, error, kind, times))
        return self

    def _record(self, verb: str, kind: str | None, call: Call) -> None:
        self.calls.append(call)
        if self.on_call is not None:
            self.on_call(call)
        for failure in self.failures:
            if failure.verb == verb and failure.kind in (None, kind) and failure.times != 0:
                if failure.times is not None:
                    failure.times -= 1
                raise failure.error

    def _fresh_uid(self, kind: str) -> str:
        """`<kind>-uid` for the first object of a kind (readable in assertions), then a new one each time."""
        taken = {each["metadata"].get("uid") for each in self.objects.values()}
        uid, serial = f"{kind}-uid", 1
        while uid in taken:
            serial += 1
            uid = f"{kind}-uid-{serial}"
        return uid

    @staticmethod
    def _next(existing: Mapping[str, Any]) -> str:
        """The stored object's next resourceVersion (each object counts its own: "1" when created)."""
        return str(int(existing["metadata"].get("resourceVersion") or 0) + 1)

    # --- KubeClient ------------------------------------------------------------------------------------------

    async def close(self) -> None:
        return None

    async def refresh(self, min_age: float = 0.0) -> Connection:
        return self.connection

    def as_session(self) -> aiohttp.ClientSession:
        raise NotImplementedError("the fake client speaks no HTTP: use tests/fake_apiserver.py")

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        self._record("request", None, ("request", method, path))
        answer = self.responses.get((method, path))
        if isinstance(answer, BaseException):
            raise answer
        if answer is None:
            raise ApiError(404, "NotFound", f"{path} not found")
        return dict(answer)

    async def stream_lines(
        self, path: str, params: Mapping[str, str] | None = None, read_timeout: float = 330
    ) -> AsyncIterator[bytes]:
        self._record("stream", None, ("stream", path, dict(params or {})))
        for line in self.lines:
            yield line
        if self.stream_hangs:
            await asyncio.Event().wait()  # never set: until the caller's timeout cancels it

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        self._record("get", kind, ("get", kind, name))
        found = self.stored(api_version, kind, name, namespace)
        return copy.deepcopy(found) if found is not None else None

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        self._record("list", kind, ("list", kind, namespace, label_selector))
        return [
            copy.deepcopy(obj)
            for (version, each_kind, each_namespace, _), obj in self.objects.items()
            if (version, each_kind) == (api_version, kind)
            and namespace in (None, each_namespace)
            and matches((obj.get("metadata") or {}).get("labels") or {}, label_selector)
        ]

    async def apply(
        self, obj: dict[str, Any], field_manager: str, force: bool = True, subresource: str | None = None
    ) -> dict[str, Any]:
        self._record("apply", obj["kind"], ("apply", obj["kind"], obj["metadata"]["name"]))
        key = key_of(obj)
        existing = self.objects.get(key)
        if existing is None:
            return await self._store(obj)
        result = merged(existing, obj)
        result["metadata"] = {**result["metadata"], "uid": existing["metadata"]["uid"]}
        result["metadata"]["resourceVersion"] = self._next(existing)
        self.objects[key] = result
        return copy.deepcopy(result)

    async def create(self, obj: dict[str, Any], field_manager: str | None = None) -> dict[str, Any]:
        self._record("create", obj["kind"], ("create", obj["kind"], (obj.get("metadata") or {}).get("name")))
        if key_of(obj) in self.objects:
            raise ApiError(409, "AlreadyExists", f"{obj['kind']} {obj['metadata'].get('name')!r} already exists")
        return await self._store(obj)

    async def _store(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(dict(obj))
        meta = stored.setdefault("metadata", {})
        meta["uid"] = self._fresh_uid(stored["kind"])
        meta["resourceVersion"] = "1"
        self.objects[key_of(stored)] = stored
        return copy.deepcopy(stored)

    async def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        sent_version = obj["metadata"].get("resourceVersion")
        self._record("replace", obj["kind"], ("replace", obj["kind"], obj["metadata"]["name"], sent_version))
        existing = self.objects.get(key_of(obj))
        if existing is None:
            raise ApiError(404, "NotFound", f"{obj['kind']} {obj['metadata']['name']!r} not found")
        if sent_version and sent_version != existing["metadata"].get("resourceVersion"):
            raise ApiError(409, "Conflict", "the object has been modified")
        stored = copy.deepcopy(obj)
        stored["metadata"] = {
            **stored["metadata"],
            "uid": existing["metadata"]["uid"],
            "resourceVersion": self._next(existing),
        }
        self.objects[key_of(obj)] = stored
        return copy.deepcopy(stored)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: dict[str, Any] | Sequence[dict[str, Any]],
        content_type: str,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        change = as_merge_patch(body) if isinstance(body, Sequence) else body
        self._record("patch", kind, ("patch", kind, name, change))
        key = (api_version, kind, namespace, name)
        existing = self.objects.get(key)
        if existing is None:
            raise ApiError(404, "NotFound", f"{kind} {name!r} not found")
        if content_type == JSON_PATCH:
            for test in (op for op in body if isinstance(op, Mapping) and op.get("op") == "test"):
                value: Any = existing
                for part in test["path"].lstrip("/").split("/"):
                    value = _step(value, part)
                if value != test.get("value"):
                    raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request")
        if (
            content_type == JSON_PATCH
            and isinstance(body, Sequence)
            and (through_list(existing, body) or parents_exist(existing, body))
        ):
            result = applied_json_patch(existing, body)  # an add replaces the whole value, as the API server's does
        else:
            result = merged(existing, change)
        result["metadata"]["resourceVersion"] = self._next(existing)
        self.objects[key] = result
        return copy.deepcopy(result)

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        self._record(
            "delete", kind, ("delete", kind, name, propagation, uid) + ((resource_version,) if resource_version else ())
        )
        key = (api_version, kind, namespace, name)
        existing = self.objects.get(key)
        if existing is None:
            return True  # already gone: what the caller wanted (the tests' objects are often only in the caches)
        meta = existing["metadata"]
        if (uid and uid != meta.get("uid")) or (resource_version and resource_version != meta.get("resourceVersion")):
            return False  # a precondition failed: the object was replaced or changed since it was read
        del self.objects[key]
        return True


def _fake_client_is_a_kube_client(client: FakeClient) -> KubeClient:
    """mypy proves here that the fake satisfies the Protocol the controller takes."""
    return client
