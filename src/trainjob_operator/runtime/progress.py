"""The TrainJob status server's decisions, pure: routes, token audiences, request parsing, who may write which
TrainJob's progress, per-TrainJob rate limits and the `metav1.Status` answers (upstream's `TrainJobStatus`
feature, KEP-2779). The controller's server does the I/O (TLS, TokenReview, reads, the status apply)."""

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..api import constants as c
from .conditions import rfc3339

_PATH = re.compile(r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs/([^/]+)/status$")
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"


def status_path(namespace: str, name: str) -> str:
    """The route the SDK POSTs to (upstream's StatusUrl)."""
    return f"/apis/{c.GROUP}/{c.VERSION}/namespaces/{namespace}/trainjobs/{name}/status"


def token_audience(namespace: str, name: str) -> str:
    """The audience of the projected token of one TrainJob's pods: a token is good for that TrainJob only."""
    return f"{c.GROUP}/{c.VERSION}/namespaces/{namespace}/trainjobs/{name}/status"


def parse_path(path: str) -> tuple[str, str] | None:
    """(namespace, name) of a status route, or None for any other path."""
    match = _PATH.match(path)
    return (match.group(1), match.group(2)) if match else None


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), else None."""
    parts = (header or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]


# --- answers --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    code: int
    body: dict[str, Any]


def failure(code: int, reason: str, message: str) -> Answer:
    """A `metav1.Status` failure, as upstream's server writes it."""
    return Answer(
        code,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        },
    )


FORBIDDEN = failure(403, "Forbidden", "Forbidden")
INVALID_PAYLOAD = failure(422, "Invalid", "Invalid payload")
TRAINJOB_NOT_FOUND = failure(404, "NotFound", "Train job not found")
INTERNAL_ERROR = failure(500, "InternalError", "Internal error")
NOT_FOUND = failure(404, "NotFound", "Not found")
TOO_LARGE = failure(413, "RequestEntityTooLarge", "Payload too large")
TOO_MANY_REQUESTS = failure(429, "TooManyRequests", "Too many requests")
REQUEST_TIMEOUT = failure(408, "Timeout", "The request body was not sent in time")


def invalid(message: str) -> Answer:
    """The API server refused the status: its message goes back to the pod (422)."""
    return failure(422, "Invalid", message)


# --- the request body -----------------------------------------------------------------------------------------


class PayloadError(ValueError):
    pass


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(f"{where}: must be an integer")
    if not -(2**31) <= value < 2**31:
        raise PayloadError(f"{where}: out of the int32 range")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise PayloadError(f"{where}: must be a string")
    return value


def parse_update(raw: bytes) -> dict[str, Any] | None:
    """The `trainerStatus` of an UpdateTrainJobStatusRequest in wire form (None when absent or null).

    Types are checked as Go's decoder does for upstream's struct (unknown fields ignored, nulls allowed);
    bounds (0..100, lengths, lastUpdatedTime required) are the CRD's and are left to the API server, whose
    message goes back to the caller. Raises PayloadError for anything that is not such a request."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        raise PayloadError(f"not JSON: {err}") from err
    if not isinstance(body, dict):
        raise PayloadError("the body must be a JSON object")
    status = body.get("trainerStatus")
    if status is None:
        return None
    if not isinstance(status, dict):
        raise PayloadError("trainerStatus: must be an object")
    out: dict[str, Any] = {}
    for key in ("progressPercentage", "estimatedRemainingSeconds"):
        if status.get(key) is not None:
            out[key] = _int(status[key], f"trainerStatus.{key}")
    metrics = status.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, list):
            raise PayloadError("trainerStatus.metrics: must be a list")
        items = []
        for i, metric in enumerate(metrics):
            if not isinstance(metric, dict):
                raise PayloadError(f"trainerStatus.metrics[{i}]: must be an object")
            items.append(
                {
                    "name": _str(metric.get("name", ""), f"trainerStatus.metrics[{i}].name"),
                    "value": _str(metric.get("value", ""), f"trainerStatus.metrics[{i}].value"),
                }
            )
        out["metrics"] = items
    if status.get("lastUpdatedTime") is not None:
        out["lastUpdatedTime"] = _rfc3339(_str(status["lastUpdatedTime"], "trainerStatus.lastUpdatedTime"))
    return out


def _rfc3339(text: str) -> str:
    """A timestamp as metav1.Time writes it (UTC, whole seconds): the SDK sends Python's isoformat()."""
    try:
        stamp = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as err:
        raise PayloadError(f"trainerStatus.lastUpdatedTime: not an RFC 3339 time: {text!r}") from err
    if stamp.tzinfo is None:
        raise PayloadError(f"trainerStatus.lastUpdatedTime: not an RFC 3339 time (no offset): {text!r}")
    return rfc3339(stamp.astimezone(UTC))


def status_apply(namespace: str, name: str, trainer_status: dict[str, Any]) -> dict[str, Any]:
    """The server-side apply body for the status subresource (field manager `trainer-status`): the manager owns
    `trainerStatus` and nothing else, so the controller's conditions are never touched."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "status": {"trainerStatus": trainer_status},
    }


# --- who may write ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """What the API server's TokenReview says about a token."""

    authenticated: bool
    username: str = ""
    audiences: tuple[str, ...] = ()
    pod_name: str | None = None
    pod_uid: str | None = None

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) of a ServiceAccount user, else None."""
        if not self.username.startswith(SERVICE_ACCOUNT_PREFIX):
            return None
        namespace, _, name = self.username[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
        return (namespace, name) if namespace and name else None


def caller_of(review: dict[str, Any]) -> Caller:
    """A Caller from a TokenReview answer (`authentication.k8s.io/v1`)."""
    status = review.get("status") or {}
    user = status.get("user") or {}
    extra = user.get("extra") or {}

    def first(key: str) -> str | None:
        values = extra.get(key) or []
        return str(values[0]) if values else None

    return Caller(
        authenticated=bool(status.get("authenticated")),
        username=str(user.get("username") or ""),
        audiences=tuple(status.get("audiences") or ()),
        pod_name=first(EXTRA_POD_NAME),
        pod_uid=first(EXTRA_POD_UID),
    )


def token_review(token: str, audience: str) -> dict[str, Any]:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token, "audiences": [audience]},
    }


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    why: str
    """For the operator's log, never for the caller (who only learns "Forbidden")."""


def authorize(
    caller: Caller,
    namespace: str,
    name: str,
    pod: dict[str, Any] | None,
    jobset: dict[str, Any] | None,
    trainjob_uid: str | None,
) -> Verdict:
    """May this caller write the progress of TrainJob namespace/name?

    Beyond upstream (which checks signature, expiry, audience and namespace only): the token must be bound to a
    live pod — the one its claims name, same UID — and that pod must belong to this TrainJob's JobSet (the JobSet
    controlled by the TrainJob, by UID). So a token minted by another workload of the namespace for this
    TrainJob's audience is refused too."""
    if not caller.authenticated:
        return Verdict(False, "the API server did not authenticate the token")
    if token_audience(namespace, name) not in caller.audiences:
        return Verdict(False, "the token is not for this TrainJob's audience")
    account = caller.service_account
    if account is None or account[0] != namespace:
        return Verdict(False, f"the token's user {caller.username!r} is not a ServiceAccount of {namespace}")
    if not caller.pod_name or not caller.pod_uid:
        return Verdict(False, "the token is not bound to a pod")
    if pod is None:
        return Verdict(False, f"the token's pod {caller.pod_name} does not exist")
    meta = pod.get("metadata") or {}
    if meta.get("uid") != caller.pod_uid or meta.get("namespace", namespace) != namespace:
        return Verdict(False, f"the token's pod {caller.pod_name} was replaced")
    if (pod.get("spec") or {}).get("serviceAccountName", "default") != account[1]:
        return Verdict(False, "the token's ServiceAccount is not its pod's")
    if jobset is None or trainjob_uid is None:
        return Verdict(False, "the TrainJob has no JobSet")
    owners = (jobset.get("metadata") or {}).get("ownerReferences") or []
    if not any(
        o.get("controller") and o.get("kind") == c.TRAINJOB_KIND and o.get("uid") == trainjob_uid for o in owners
    ):
        return Verdict(False, "the JobSet is not controlled by this TrainJob")
    labels = meta.get("labels") or {}
    if labels.get(c.JOBSET_NAME_LABEL) != name or labels.get(c.JOBSET_UID_LABEL) != (jobset.get("metadata") or {}).get(
        "uid"
    ):
        return Verdict(False, f"the token's pod {caller.pod_name} is not a pod of this TrainJob")
    return Verdict(True, "ok")


def token_expiry(token: str) -> float | None:
    """The `exp` claim of a JWT (seconds since the epoch), read without verification: only used to bound how long
    a review the API server already made may be reused."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        padded = parts[1] + "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


# --- per-TrainJob rate limits ----------------------------------------------------------------------------------


@dataclass
class Bucket:
    tokens: float
    stamp: float


@dataclass
class RateLimits:
    """A token bucket per TrainJob (`qps` refill, `burst` capacity); time is an argument. The SDK sends at most one
    update per 5 s per process, so a TrainJob with N pods reporting needs about N/5 qps."""

    qps: float
    burst: int
    max_keys: int = 10000
    buckets: dict[tuple[str, str], Bucket] = field(default_factory=dict)

    def allow(self, key: tuple[str, str], now: float) -> bool:
        if self.qps <= 0:
            return True
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= self.max_keys:
                self._forget_full(now)
            bucket = self.buckets[key] = Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.qps)
        bucket.stamp = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _forget_full(self, now: float) -> None:
        """Buckets that refilled completely carry no state: drop them (the table stays bounded)."""
        for key in [k for k, b in self.buckets.items() if b.tokens + (now - b.stamp) * self.qps >= self.burst]:
            del self.buckets[key]
        if len(self.buckets) >= self.max_keys:
            self.buckets.clear()


# --- cheap under abuse: a local pre-filter, a TokenReview budget, two caches -----------------------------------

MAX_TOKEN_BYTES = 8192
"""A projected ServiceAccount token is about 1 KiB (header, claims with pod and node names, an RS256 or ES256
signature); 8 KiB leaves room for long names and keys."""
CLOCK_LEEWAY_SECONDS = 60
"""The API server's JWT validation allows this much clock skew (go-jose's default leeway); the pre-filter refuses only
what the API server would refuse too."""
_SEGMENT = re.compile(r"^[A-Za-z0-9_-]+$")


def _claims_of(segment: str) -> dict[str, Any] | None:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        return None
    return decoded if isinstance(decoded, dict) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def prefilter(token: str, audience: str, now: float) -> str | None:
    """Why `token` cannot pass a TokenReview for `audience` at wall time `now`, read from the token itself, or None
    when it may. Decoded without verifying anything, only to refuse early: the TokenReview stays the authority for
    every token this lets through. A trainer pod's token is a projected ServiceAccount JWT with the TrainJob's
    audience and an expiry; anything else (other shapes, another audience, expired, not yet valid, oversized) never
    costs an API call."""
    if len(token) > MAX_TOKEN_BYTES:
        return f"longer than {MAX_TOKEN_BYTES} bytes"
    parts = token.split(".")
    if len(parts) != 3 or not all(_SEGMENT.match(part) for part in parts):
        return "not a JWT (three base64url segments)"
    header, claims = _claims_of(parts[0]), _claims_of(parts[1])
    if header is None or not isinstance(header.get("alg"), str) or header.get("alg", "").lower() == "none":
        return "no signed JWT header"
    if claims is None:
        return "no JSON claims"
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if audience not in audiences:
        return "not for this TrainJob's audience"
    exp, nbf = _number(claims.get("exp")), _number(claims.get("nbf"))
    if exp is None:
        return "no expiry"
    if exp + CLOCK_LEEWAY_SECONDS < now:
        return "expired"
    if nbf is not None and nbf - CLOCK_LEEWAY_SECONDS > now:
        return "not valid yet"
    return None


@dataclass
class ReviewBudget:
    """How many TokenReviews the server may send: a token bucket over all callers (`qps`, `burst`), one per
    caller's address (`client_qps`, `client_burst`: one noisy pod cannot spend the others' share) and at most
    `in_flight` at once. Time is an argument; the table of addresses stays bounded as `RateLimits`' does."""

    qps: float
    burst: int
    in_flight: int
    client_qps: float
    client_burst: int
    max_clients: int = 10000
    total: Bucket | None = None
    clients: RateLimits | None = None

    def admit(self, client: str, now: float, in_flight: int) -> str | None:
        """None when one more TokenReview may go out now (the budget is spent), else why not."""
        if in_flight >= self.in_flight:
            return f"{self.in_flight} TokenReviews in flight"
        if self.total is None:
            self.total = Bucket(float(self.burst), now)
        self.total.tokens = min(float(self.burst), self.total.tokens + (now - self.total.stamp) * self.qps)
        self.total.stamp = now
        if self.total.tokens < 1:
            return f"more than {self.qps:g} TokenReviews per second"
        if self.clients is None:
            self.clients = RateLimits(self.client_qps, self.client_burst, self.max_clients)
        if not self.clients.allow(("client", client), now):
            return f"more than {self.client_qps:g} TokenReviews per second for {client}"
        self.total.tokens -= 1
        return None


@dataclass
class ReviewCache:
    """TokenReview outcomes by key, grants and refusals apart: each table is an LRU of its own size, so refusals
    (which anyone can cause, one per garbage token) only ever evict refusals, never a grant a pod relies on. Time
    is an argument."""

    grants_size: int = 4096
    refusals_size: int = 4096
    grants: dict[Any, float] = field(default_factory=dict)
    refusals: dict[Any, float] = field(default_factory=dict)

    def get(self, key: Any, now: float) -> bool | None:
        """True (granted), False (refused) while the entry lasts, else None."""
        for table, verdict in ((self.grants, True), (self.refusals, False)):
            until = table.get(key)
            if until is None:
                continue
            if until > now:
                table[key] = table.pop(key)  # most recently used last
                return verdict
            del table[key]
        return None

    def put(self, key: Any, allowed: bool, until: float, now: float) -> None:
        if until <= now:
            return
        table, size = (self.grants, self.grants_size) if allowed else (self.refusals, self.refusals_size)
        (self.refusals if allowed else self.grants).pop(key, None)
        table.pop(key, None)
        table[key] = until
        while len(table) > size:
            del table[next(iter(table))]
