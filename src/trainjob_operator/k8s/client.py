"""A small async Kubernetes client: the few verbs the operator uses, with client-side QPS/burst limits.

Server-side apply always uses one field manager and force (spec §5.1); status uses a JSON merge patch.
"""

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp

from .config import Connection

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


class ApiError(Exception):
    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None,
                 retry_after: float | None = None) -> None:
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


def retry_after(err: BaseException) -> float | None:
    return err.retry_after if isinstance(err, ApiError) else None


def _retry_after(header: str | None) -> float | None:
    try:
        return min(max(float(header), 0.0), 600.0) if header else None
    except ValueError:
        return None


class RateLimiter:
    """Token bucket: `qps` tokens per second, up to `burst` at once (client-go's flowcontrol)."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, max(burst, 1)
        self._tokens = float(self.burst)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
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


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API."""

    api_version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        group_path = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        parts = [group_path]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace)}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name))
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


KNOWN: dict[tuple[str, str], Resource] = {
    ("v1", "ConfigMap"): Resource("v1", "configmaps"),
    ("v1", "Secret"): Resource("v1", "secrets"),
    ("v1", "Event"): Resource("v1", "events"),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): Resource("jobset.x-k8s.io/v1alpha2", "jobsets"),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): Resource("scheduling.x-k8s.io/v1alpha1", "podgroups"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): Resource("scheduling.volcano.sh/v1beta1", "podgroups"),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): Resource("trainer.kubeflow.org/v1alpha1", "trainjobs"),
    ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime"): Resource("trainer.kubeflow.org/v1alpha1",
                                                                   "trainingruntimes"),
    ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"): Resource(
        "trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", namespaced=False),
    ("coordination.k8s.io/v1", "Lease"): Resource("coordination.k8s.io/v1", "leases"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): Resource(
        "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", namespaced=False),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): Resource(
        "admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", namespaced=False),
    ("scheduling.k8s.io/v1", "PriorityClass"): Resource("scheduling.k8s.io/v1", "priorityclasses", namespaced=False),
}


def resource_name(path: str) -> str:
    """The plural of a request path (`/apis/g/v/namespaces/ns/jobsets/x/status` → `jobsets`)."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if len(parts) >= 2 and parts[0] == "namespaces" and len(parts) > 2:
        parts = parts[2:]
    return parts[0] if parts else ""


def resource_of(api_version: str, kind: str) -> Resource:
    try:
        return KNOWN[(api_version, kind)]
    except KeyError:
        raise ValueError(f"unknown kind {kind} in {api_version}") from None


class Client:
    def __init__(self, connection: Connection, qps: float = 50, burst: int = 100, timeout: float = 30,
                 on_request: Callable[[str, str], None] | None = None) -> None:
        self.connection = connection
        self.on_request = on_request
        self.qps, self.burst = qps, burst
        self.limiters: dict[str, RateLimiter] = {}
        self.requests: dict[str, int] = {}
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.connection.ssl_context, limit=64)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def request(self, method: str, path: str, *, body: Any = None, content_type: str = "application/json",
                      params: Mapping[str, str] | None = None) -> dict[str, Any]:
        resource = resource_name(path)
        limiter = self.limiters.get(resource)
        if limiter is None:
            # One bucket per resource type, as controller-runtime's clients have: the same settings mean the same.
            limiter = self.limiters[resource] = RateLimiter(self.qps, self.burst)
        await limiter.acquire()
        self.requests[method] = self.requests.get(method, 0) + 1
        if self.on_request is not None:
            self.on_request(method, resource)
        headers = {"Accept": "application/json"}
        token = self.connection.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body)
        url = self.connection.server + path + (f"?{urlencode(params)}" if params else "")
        async with self._http().request(method, url, data=data, headers=headers) as response:
            text = await response.text()
            payload: dict[str, Any] = json.loads(text) if text and text.lstrip().startswith("{") else {}
            if response.status >= 400:
                raise ApiError(response.status, payload.get("reason", response.reason or ""),
                               payload.get("message", text[:500]), payload,
                               _retry_after(response.headers.get("Retry-After")))
            return payload

    # --- verbs --------------------------------------------------------------------------------------

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return await self.request("GET", resource_of(api_version, kind).path(namespace, name))
        except ApiError as err:
            if err.not_found:
                return None
            raise

    async def list(self, api_version: str, kind: str, namespace: str | None = None,
                   label_selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else None
        result = await self.request("GET", resource_of(api_version, kind).path(namespace), params=params)
        items: list[dict[str, Any]] = result.get("items", [])
        return items

    async def apply(self, obj: dict[str, Any], field_manager: str, force: bool = True,
                    subresource: str | None = None) -> dict[str, Any]:
        """Server-side apply of a whole object (apply patches may be JSON, which is YAML)."""
        meta = obj["metadata"]
        path = resource_of(obj["apiVersion"], obj["kind"]).path(meta.get("namespace"), meta["name"], subresource)
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return await self.request("PATCH", path, body=obj, content_type=APPLY, params=params)

    async def create(self, obj: dict[str, Any], field_manager: str | None = None) -> dict[str, Any]:
        meta = obj["metadata"]
        params = {"fieldManager": field_manager} if field_manager else None
        return await self.request("POST", resource_of(obj["apiVersion"], obj["kind"]).path(meta.get("namespace")),
                                  body=obj, params=params)

    async def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        path = resource_of(obj["apiVersion"], obj["kind"]).path(meta.get("namespace"), meta["name"])
        return await self.request("PUT", path, body=obj)

    async def merge_patch(self, api_version: str, kind: str, name: str, namespace: str | None, patch: dict[str, Any],
                          subresource: str | None = None) -> dict[str, Any]:
        path = resource_of(api_version, kind).path(namespace, name, subresource)
        return await self.request("PATCH", path, body=patch, content_type=MERGE)

    async def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
                     propagation: str = "Background") -> bool:
        try:
            await self.request("DELETE", resource_of(api_version, kind).path(namespace, name),
                               body={"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation})
            return True
        except ApiError as err:
            if err.not_found:
                return False
            raise
