"""A small async Kubernetes client: the few verbs the operator uses, with client-side QPS/burst limits.

Server-side apply always uses one field manager and force (docs/upstream-behaviour.md, "Objects, names and server-side apply"); status uses a JSON merge patch.
"""

import asyncio
import contextlib
import datetime as dt
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from ..codec import jsontext
from . import connection as k8s_config
from .connection import Connection

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message, self.body = status, reason, message, body or {}
        self.retry_after = retry_after
        """Seconds the server asked us to wait (429/503 Retry-After), honoured by the work queue."""

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


def is_transient(err: BaseException) -> bool:
    """A failure of the connection or the API server (not of the object): retry with backoff, log aggregated."""
    if isinstance(err, ApiError):
        return err.status >= 500 or err.status in (408, 409, 429)
    return isinstance(err, aiohttp.ClientError | OSError | TimeoutError | asyncio.TimeoutError)


RETRY_AFTER_CAP = 60.0
"""Longest wait a Retry-After imposes on the next request for the same object."""
RETRY_AFTER_PASSES = 8
"""Pauses one request makes for its object's Retry-After before it is sent anyway."""


def retry_key(method: str, path: str, body: Any = None) -> str:
    """What a Retry-After is about: the object of the request (its path; for a create, the collection's path and
    the new object's name), whatever the verb and subresource."""
    path = path.split("?", 1)[0]
    if method == "POST" and isinstance(body, dict):
        meta = body.get("metadata")
        name = (meta.get("name") or meta.get("generateName")) if isinstance(meta, dict) else None
        if name:
            path = f"{path}/{name}"
    for suffix in ("/status", "/scale"):
        path = path.removesuffix(suffix)
    return path


def retry_after(err: BaseException) -> float | None:
    return err.retry_after if isinstance(err, ApiError) else None


def parse_retry_after(header: str | None) -> float | None:
    try:
        return min(max(float(header), 0.0), 600.0) if header else None
    except ValueError:
        return None


class RateLimiter:
    """Token bucket: `qps` tokens per second, up to `burst` at once (client-go's flowcontrol); `qps` 0 is no bucket.
    Whatever the bucket, `hold` makes every caller wait until a moment the API server named (429 Retry-After)."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, max(burst, 1)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()
        self._not_before = 0.0

    def hold(self, seconds: float) -> None:
        """The API server asked for a pause (API Priority and Fairness rejecting, 429): nobody sends before it ends."""
        self._not_before = max(self._not_before, time.monotonic() + seconds)

    async def acquire(self) -> None:
        pause = self._not_before - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        if self.qps <= 0:
            return
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
            self._stamp = now
            if self._tokens < 1:
                wait = (1 - self._tokens) / self.qps
                await asyncio.sleep(wait)
                self._stamp = time.monotonic()
                self._tokens = 0.0
            else:
                self._tokens -= 1


THROTTLE_RETRIES = 3
"""Times a request the API server refused with 429 is sent again after its Retry-After (client-go: 10)."""
THROTTLE_MAX_WAIT = 10.0
"""The longest Retry-After waited in the client; longer ones go back to the caller (the work queue honours them)."""


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API."""

    api_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        group_path = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        parts = [group_path]
        # Each name is one path segment, quoted with nothing kept: a "/" in a name (a caller's bug, or a crafted UI
        # route) can never reach another resource (issue 33).
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


BUILTIN_RESOURCES: tuple[tuple[str, Resource], ...] = (
    # (kind, where it lives) of the kinds the operator's own machinery reads and writes; the composition root adds the
    # kinds the plugins write (`RESTMapper.with_kinds`).
    ("ConfigMap", Resource("v1", "configmaps")),
    ("Secret", Resource("v1", "secrets")),
    ("Event", Resource("v1", "events")),
    ("Pod", Resource("v1", "pods")),
    ("TokenReview", Resource("authentication.k8s.io/v1", "tokenreviews", namespaced=False)),
    ("SubjectAccessReview", Resource("authorization.k8s.io/v1", "subjectaccessreviews", namespaced=False)),
    ("JobSet", Resource("jobset.x-k8s.io/v1alpha2", "jobsets")),
    ("TrainJob", Resource("trainer.kubeflow.org/v1alpha1", "trainjobs")),
    ("TrainingRuntime", Resource("trainer.kubeflow.org/v1alpha1", "trainingruntimes")),
    ("ClusterTrainingRuntime", Resource("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", namespaced=False)),
    ("Lease", Resource("coordination.k8s.io/v1", "leases")),
    (
        "ValidatingWebhookConfiguration",
        Resource("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", namespaced=False),
    ),
    (
        "MutatingWebhookConfiguration",
        Resource("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", namespaced=False),
    ),
    ("PriorityClass", Resource("scheduling.k8s.io/v1", "priorityclasses", namespaced=False)),
    # Kueue's Workload of a suspended queued TrainJob: why Kueue stopped it (runtime/kueue.py).
    ("Workload", Resource("kueue.x-k8s.io/v1beta2", "workloads")),
)


@dataclass(frozen=True)
class RESTMapper:
    """(apiVersion, kind) → where it lives in the REST API, as controller-runtime's RESTMapper: one value built by the
    composition root (the built-in kinds and every child kind the plugins declare) and handed to each client. Never
    changed once built (`with_kinds` returns a new mapper), so two operators in one process cannot see each other's
    kinds and tests need not reset anything."""

    resources: Mapping[tuple[str, str], Resource] = field(
        default_factory=lambda: MappingProxyType({(r.api_version, kind): r for kind, r in BUILTIN_RESOURCES})
    )

    def with_kinds(self, resources: Iterable[tuple[str, Resource]]) -> "RESTMapper":
        """This mapper and more kinds, as (kind, where it lives); a kind already known keeps its first mapping."""
        merged = dict(self.resources)
        for kind, resource in resources:
            merged.setdefault((resource.api_version, kind), resource)
        return RESTMapper(MappingProxyType(merged))

    def resource_of(self, api_version: str, kind: str) -> Resource:
        try:
            return self.resources[(api_version, kind)]
        except KeyError:
            raise ValueError(f"unknown kind {kind} in {api_version}") from None


BUILTIN = RESTMapper()
"""The built-in kinds only (what a client without plugin kinds reaches: the UI, the benchmarks, start-up checks)."""


def resource_name(path: str) -> str:
    """The plural of a request path (`/apis/g/v/namespaces/ns/jobsets/x/status` → `jobsets`)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(parts) >= 2 and parts[0] == "namespaces" and len(parts) > 2:
        parts = parts[2:]
    return parts[0] if parts else ""


def env_proxy(server: str, proxy_url: str | None) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy for `server`: the kubeconfig's `proxy-url`, else the environment's ($HTTPS_PROXY, $NO_PROXY...)."""
    if proxy_url:
        return proxy_url, None
    try:
        proxy, auth = get_env_proxy_for_url(URL(server))
    except LookupError:  # no proxy for this URL
        return None, None
    return str(proxy), auth


class Client:
    def __init__(
        self,
        connection: Connection,
        qps: float = 50,
        burst: int = 100,
        timeout: float = 30,
        on_request: Callable[[str, str], None] | None = None,
        mapper: RESTMapper = BUILTIN,
    ) -> None:
        self.connection = connection
        self.on_request = on_request
        self.mapper = mapper
        """Where each kind lives (the composition root's, with the plugins' child kinds)."""
        self.qps, self.burst = qps, burst
        self.limiters: dict[str, RateLimiter] = {}
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._retired: list[aiohttp.ClientSession] = []
        self._refreshing = asyncio.Lock()
        self._ahead: asyncio.Task[Connection] | None = None
        self._not_before: dict[str, float] = {}
        """Per object path: when the API server's Retry-After (429/503) allows the next request for it."""

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._ahead is not None:
            self._ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._ahead
        for session in [*self._retired, self._session]:
            if session is not None:
                await session.close()
        self._session, self._retired = None, []

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.connection.ssl_context, limit=64)
            # Like kubectl: the kubeconfig's proxy-url, else $HTTPS_PROXY/$NO_PROXY, read once here. (aiohttp's
            # trust_env would read them, and ~/.netrc, in a thread for every request: two thread hops per call.)
            proxy, proxy_auth = env_proxy(self.connection.server, self.connection.proxy_url)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, proxy=proxy, proxy_auth=proxy_auth
            )
        return self._session

    def limiter(self, resource: str) -> RateLimiter:
        """The token bucket of one resource type, as controller-runtime's clients have one per client: every request
        to that resource, whoever sends it through this client, takes its tokens and honours its pauses."""
        limiter = self.limiters.get(resource)
        if limiter is None:
            limiter = self.limiters[resource] = RateLimiter(self.qps, self.burst)
        return limiter

    def as_session(self) -> aiohttp.ClientSession:
        """A new aiohttp session whose requests go out as this client's do: with its current credentials, its TLS
        settings and `tls-server-name`, its proxy, through its per-resource rate limiters (a 429's Retry-After pauses
        the resource for both), counted by its `on_request` hook (the request metrics). For another library's
        requests (kopf's lists and watches); whoever takes it closes it."""
        connection = self.connection
        proxy, proxy_auth = env_proxy(connection.server, connection.proxy_url)
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=connection.ssl_context, limit=0),  # watches are long: no pool limit
            proxy=proxy,
            proxy_auth=proxy_auth,
            middlewares=(self._as_this_client,),
        )

    async def _as_this_client(
        self, request: aiohttp.ClientRequest, send: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        resource = resource_name(request.url.raw_path)
        limiter = self.limiter(resource)
        await limiter.acquire()
        if self.on_request is not None:
            self.on_request(request.method, resource)
        self._refresh_if_expiring(dt.datetime.now(dt.UTC))
        if self.connection.expiry is not None and dt.datetime.now(dt.UTC) >= self.connection.expiry:
            await self.refresh(min_age=10.0)  # expired: nothing to send until fresh credentials are here
        connection = self.connection
        authorization = connection.header()
        if authorization:
            request.headers["Authorization"] = authorization
        if connection.tls_server_name:
            request.server_hostname = connection.tls_server_name
        response = await send(request)
        if response.status == 429:
            limiter.hold(min(parse_retry_after(response.headers.get("Retry-After")) or 1.0, THROTTLE_MAX_WAIT))
        return response

    async def refresh(self, min_age: float = 0.0) -> Connection:
        """Resolve the credentials again (exec plugin token expiring, 401); concurrent callers share one refresh, and
        one younger than `min_age` seconds is reused."""
        stale = self.connection
        async with self._refreshing:
            if self.connection is not stale or time.monotonic() - self.connection.resolved_at < min_age:
                return self.connection
            fresh = await k8s_config.refresh(stale)
            if (fresh.cert_pem, fresh.key_pem, fresh.ca_pem, fresh.proxy_url) != (
                stale.cert_pem,
                stale.key_pem,
                stale.ca_pem,
                stale.proxy_url,
            ) and self._session is not None:
                self._retired.append(self._session)  # in-flight requests finish on it; closed with the client
                self._session = None
            self.connection = fresh
            return fresh

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        resource = resource_name(path)
        limiter = self.limiter(resource)
        data = jsontext.compact(body) if body is not None else None
        query = f"?{urlencode(params)}" if params else ""
        target = retry_key(method, path, body)
        for attempt in range(THROTTLE_RETRIES + 1):
            await limiter.acquire()
            try:
                return await self._request(method, resource, path + query, data, content_type, target)
            except ApiError as err:
                # API Priority and Fairness (or max-requests-inflight) refused: every request to this resource
                # waits as long as the server asked, then this one goes again. The server sets the pace, not a
                # fixed client-side QPS.
                wait = err.retry_after if err.retry_after is not None else 1.0
                if err.status != 429 or attempt == THROTTLE_RETRIES or wait > THROTTLE_MAX_WAIT:
                    raise
                limiter.hold(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _request(
        self, method: str, resource: str, path: str, data: bytes | None, content_type: str, target: str
    ) -> dict[str, Any]:
        if self.on_request is not None:
            self.on_request(method, resource)
        self._refresh_if_expiring(dt.datetime.now(dt.UTC))
        if self.connection.expiry is not None and dt.datetime.now(dt.UTC) >= self.connection.expiry:
            await self.refresh(min_age=10.0)  # expired: nothing to send until fresh credentials are here
        await self._honour_retry_after(target)
        try:
            return await self._send(method, path, data, content_type)
        except ApiError as err:
            if err.retry_after and err.status in (429, 503):
                # max: a request in flight alongside may have been told to wait longer for the same object
                until = time.monotonic() + min(err.retry_after, RETRY_AFTER_CAP)
                self._not_before[target] = max(until, self._not_before.get(target, 0.0))
            if err.status != 401 or not self.connection.refreshable:
                raise
        await self.refresh(min_age=1.0)  # a rotated token file, an exec token revoked early: once more
        return await self._send(method, path, data, content_type)

    async def _honour_retry_after(self, target: str) -> None:
        """The API server asked to wait before asking again about this object (429/503 with Retry-After): whoever
        asks next (a reconcile a watch event triggered, the leader elector's next renewal) waits that long."""
        if len(self._not_before) > 4096:  # bounded: drop what has expired
            now = time.monotonic()
            self._not_before = {k: v for k, v in self._not_before.items() if v > now}
        # Looked up again after each pause: a request in flight while this one waited may have been told to wait
        # longer. Bounded: each pass needs another Retry-After from the server, each capped at RETRY_AFTER_CAP.
        for _ in range(RETRY_AFTER_PASSES):
            when = self._not_before.get(target)
            if when is None:
                return
            wait = when - time.monotonic()
            if wait <= 0:
                self._not_before.pop(target, None)
                return
            await asyncio.sleep(wait)

    def _refresh_if_expiring(self, now: dt.datetime) -> None:
        """Shortly before the credentials expire, resolve them again in the background: requests go on with the
        still valid ones meanwhile (a plugin handing out short-lived tokens is asked at most every 10 s)."""
        if not self.connection.expiring(now) or (self._ahead is not None and not self._ahead.done()):
            return
        if time.monotonic() - self.connection.resolved_at >= 10.0:
            self._ahead = asyncio.create_task(self.refresh(min_age=10.0))
            self._ahead.add_done_callback(lambda task: task.cancelled() or task.exception())  # errors: retried later

    async def _send(self, method: str, path: str, data: bytes | None, content_type: str) -> dict[str, Any]:
        connection = self.connection
        headers = {"Accept": "application/json"}
        authorization = connection.header()
        if authorization:
            headers["Authorization"] = authorization
        if data is not None:
            headers["Content-Type"] = content_type
        async with self._http().request(
            method, connection.server + path, data=data, headers=headers, server_hostname=connection.tls_server_name
        ) as response:
            raw = await response.read()
            payload: dict[str, Any] = jsontext.loads(raw) if raw.lstrip()[:1] == b"{" else {}
            if response.status >= 400:
                raise ApiError(
                    response.status,
                    payload.get("reason", response.reason or ""),
                    payload.get("message", raw[:500].decode(errors="replace")),
                    payload,
                    parse_retry_after(response.headers.get("Retry-After")),
                )
            return payload

    # --- verbs --------------------------------------------------------------------------------------

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return await self.request("GET", self.mapper.resource_of(api_version, kind).path(namespace, name))
        except ApiError as err:
            if err.not_found:
                return None
            raise

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else None
        result = await self.request("GET", self.mapper.resource_of(api_version, kind).path(namespace), params=params)
        items: list[dict[str, Any]] = result.get("items", [])
        return items

    async def apply(
        self, obj: dict[str, Any], field_manager: str, force: bool = True, subresource: str | None = None
    ) -> dict[str, Any]:
        """Server-side apply of a whole object (apply patches may be JSON, which is YAML)."""
        meta = obj["metadata"]
        path = self.mapper.resource_of(obj["apiVersion"], obj["kind"]).path(
            meta.get("namespace"), meta["name"], subresource
        )
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return await self.request("PATCH", path, body=obj, content_type=APPLY, params=params)

    async def create(self, obj: dict[str, Any], field_manager: str | None = None) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        params = {"fieldManager": field_manager} if field_manager else None
        return await self.request(
            "POST",
            self.mapper.resource_of(obj["apiVersion"], obj["kind"]).path(meta.get("namespace")),
            body=obj,
            params=params,
        )

    async def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        path = self.mapper.resource_of(obj["apiVersion"], obj["kind"]).path(meta.get("namespace"), meta["name"])
        return await self.request("PUT", path, body=obj)

    async def merge_patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        patch: dict[str, Any],
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return await self.patch(api_version, kind, name, namespace, patch, MERGE, subresource)

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
        """A PATCH of any type (MERGE, JSON_PATCH: a list of operations, whose `test` makes it conditional)."""
        path = self.mapper.resource_of(api_version, kind).path(namespace, name, subresource)
        return await self.request("PATCH", path, body=body, content_type=content_type)

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
        """Delete; with `uid`, only that incarnation of the object; with `resource_version`, only that version of
        it (preconditions: a conflict means it was replaced or changed since it was read, and counts as not
        deleted)."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            options["preconditions"] = preconditions
        try:
            await self.request("DELETE", self.mapper.resource_of(api_version, kind).path(namespace, name), body=options)
            return True
        except ApiError as err:
            if err.not_found or (preconditions and err.conflict):
                return False
            raise

    # --- streams (the read-only UI) -------------------------------------------------------------------------

    async def stream_lines(
        self, path: str, params: Mapping[str, str] | None = None, read_timeout: float = 330
    ) -> AsyncIterator[bytes]:
        """The lines of a long-running GET (a watch, a followed log); the QPS limit applies to opening it."""
        await self.limiter(resource_name(path)).acquire()
        self._refresh_if_expiring(dt.datetime.now(dt.UTC))
        connection = self.connection
        headers = {"Accept": "application/json"}
        authorization = connection.header()
        if authorization:
            headers["Authorization"] = authorization
        url = connection.server + path + (f"?{urlencode(params)}" if params else "")
        timeout = aiohttp.ClientTimeout(total=None, sock_read=read_timeout)
        async with self._http().get(
            url, headers=headers, timeout=timeout, server_hostname=connection.tls_server_name
        ) as response:
            if response.status >= 400:
                text = await response.text()
                payload = json.loads(text) if text.lstrip().startswith("{") else {}
                raise ApiError(
                    response.status,
                    payload.get("reason", response.reason or ""),
                    payload.get("message", text[:500]),
                    payload,
                )
            async for line in response.content:
                yield line

    async def watch(
        self,
        path: str,
        resource_version: str | None = None,
        params: Mapping[str, str] | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[dict[str, Any]]:
        """Watch events of a collection path from `resource_version`; ends when the server closes the watch."""
        query = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds), **(params or {})}
        if resource_version:
            query["resourceVersion"] = resource_version
        async for line in self.stream_lines(path, query, read_timeout=timeout_seconds + 30):
            if line.strip():
                event: dict[str, Any] = json.loads(line)
                yield event

    async def text(self, path: str, params: Mapping[str, str] | None = None) -> str:
        """A plain-text GET (pod logs)."""
        lines = [line async for line in self.stream_lines(path, params, read_timeout=30)]
        return b"".join(lines).decode(errors="replace")


class KubeClient(Protocol):
    """What the controller asks of a Kubernetes client: the verbs, raw requests and streams, and what kopf's login
    needs (credentials, a session that goes out as this client). `Client` is the one implementation; the tests'
    `tests/fake_client.py` the other (in memory). Every `controller/` parameter that takes a client has this type."""

    @property
    def mapper(self) -> RESTMapper: ...

    @property
    def connection(self) -> Connection: ...

    async def close(self) -> None: ...

    async def refresh(self, min_age: float = 0.0) -> Connection: ...

    def as_session(self) -> aiohttp.ClientSession: ...

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]: ...

    def stream_lines(
        self, path: str, params: Mapping[str, str] | None = None, read_timeout: float = 330
    ) -> AsyncIterator[bytes]: ...

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None: ...

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]: ...

    async def apply(
        self, obj: dict[str, Any], field_manager: str, force: bool = True, subresource: str | None = None
    ) -> dict[str, Any]: ...

    async def create(self, obj: dict[str, Any], field_manager: str | None = None) -> dict[str, Any]: ...

    async def replace(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        body: dict[str, Any] | Sequence[dict[str, Any]],
        content_type: str,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool: ...


def _client_is_a_kube_client(client: Client) -> KubeClient:
    """mypy proves here that `Client` satisfies `KubeClient` (a protocol mismatch fails `make lint`)."""
    return client
