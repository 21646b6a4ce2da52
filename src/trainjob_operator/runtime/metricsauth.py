"""Who may read /metrics with `metrics.auth.enabled` (upstream's setting, kubeflow/trainer#3912), pure: the scraper's
bearer token is authenticated by the API server (TokenReview, the API server's own audiences) and the user it
names must be authorised for `get` on the non-resource URL /metrics (SubjectAccessReview), as controller-runtime's
`filters.WithAuthenticationAndAuthorization` does. The executor (`controller/metricsserver.py`) sends the reviews."""

from dataclasses import dataclass, field
from typing import Any

PATH = "/metrics"
MAX_TOKEN_BYTES = 4096
"""A longer bearer token is refused without asking the API server (service account tokens are ~1 KiB; aiohttp
refuses a header line over 8190 bytes before the server sees it)."""
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")


@dataclass(frozen=True)
class Scraper:
    """The user a TokenReview found behind a token."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)


def plausible(token: str) -> bool:
    """Worth a TokenReview: not empty, not oversized, only the characters of a bearer token (RFC 6750 `b64token`)."""
    return 0 < len(token) <= MAX_TOKEN_BYTES and all(ch in _TOKEN_CHARS for ch in token)


def token_review(token: str) -> dict[str, Any]:
    """No audiences: the API server checks its own (a scraper's ordinary service account token)."""
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}


def scraper_of(review: dict[str, Any]) -> Scraper | None:
    """The authenticated user of a TokenReview answer, else None."""
    status = review.get("status") or {}
    user = status.get("user") or {}
    if not status.get("authenticated") or not user.get("username"):
        return None
    extra = {str(k): [str(v) for v in values or []] for k, values in (user.get("extra") or {}).items()}
    return Scraper(
        username=str(user["username"]),
        uid=str(user.get("uid") or ""),
        groups=tuple(str(g) for g in user.get("groups") or ()),
        extra=extra,
    )


def access_review(scraper: Scraper) -> dict[str, Any]:
    """May this user `get` /metrics? (A ClusterRole rule `nonResourceURLs: ["/metrics"], verbs: ["get"]` says yes.)"""
    spec: dict[str, Any] = {
        "user": scraper.username,
        "groups": list(scraper.groups),
        "nonResourceAttributes": {"path": PATH, "verb": "get"},
    }
    if scraper.uid:
        spec["uid"] = scraper.uid
    if scraper.extra:
        spec["extra"] = scraper.extra
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def allowed(review: dict[str, Any]) -> bool:
    return bool((review.get("status") or {}).get("allowed"))


UNAUTHORIZED = (401, "Unauthorized")
"""No bearer token, an implausible one, or one the API server does not authenticate."""
FORBIDDEN = (403, "Forbidden")
"""Authenticated, but not allowed `get` on /metrics."""
