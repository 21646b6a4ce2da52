"""Who the UI serves, decided without I/O (issue 33): the UI reads with its user's kubeconfig, so it must never act
for anyone else. Only its user's browser: a per-run token (printed in the URL, exchanged for an `HttpOnly`,
`SameSite=Strict` cookie), no request from another site (`Origin`, `Sec-Fetch-Site`) or under a foreign `Host`
(DNS rebinding), a non-loopback address only when asked for, and every route parameter the Kubernetes name it must be
before it is put in an API path."""

import hmac
import ipaddress
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

COOKIE: Final = "trainjob-ui"
_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL: Final = re.compile(_LABEL)
DNS1123_SUBDOMAIN: Final = re.compile(rf"{_LABEL}(\.{_LABEL})*")

ROUTE_NAMES: Final = MappingProxyType(
    {
        # route parameter -> (what it names, the rule it must follow)
        "namespace": ("a namespace", "label"),
        "name": ("a TrainJob name", "subdomain"),
        "pod": ("a pod name", "subdomain"),
        "container": ("a container name", "label"),
    }
)


def name_problem(kind: str, value: str) -> str | None:
    """Why `value` cannot be what route parameter `kind` names (None: it can). A DNS-1123 label is at most 63
    characters of `[a-z0-9-]`, starting and ending alphanumeric; a subdomain is such labels joined by dots, at most
    253. Neither has `/`, `%`, `..` or anything else an API path could be steered with."""
    what, rule = ROUTE_NAMES[kind]
    if rule == "label":
        if len(value) <= 63 and DNS1123_LABEL.fullmatch(value):
            return None
        return (
            f"{kind}: {value[:80]!r} is not {what}: a DNS-1123 label (at most 63 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit)"
        )
    if len(value) <= 253 and DNS1123_SUBDOMAIN.fullmatch(value):
        return None
    return (
        f"{kind}: {value[:80]!r} is not {what}: a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and "
        "'.', each dot-separated part starting and ending with a letter or digit)"
    )


def route_problem(params: Mapping[str, str]) -> str | None:
    """The first route or query parameter of `params` that is not the name it must be, said; None when all are."""
    for kind in ROUTE_NAMES:
        value = params.get(kind)
        if value is not None:
            problem = name_problem(kind, value)
            if problem is not None:
                return problem
    return None


def is_loopback(address: str) -> bool:
    """Whether listening on `address` keeps the UI to this machine: a loopback IP or `localhost`."""
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def remote_refusal(address: str, allow_remote: bool) -> str | None:
    """The error for listening on a non-loopback address without `--allow-remote` (None: fine)."""
    if allow_remote or is_loopback(address):
        return None
    return (
        f"--address {address} is not a loopback address: anyone who reaches it could read what your kubeconfig "
        "can (behind the token only). Pass --allow-remote as well to mean it; `kubectl port-forward` reaches a "
        "pod's 127.0.0.1, so a UI in a pod needs neither"
    )


def matches(secret: str, offered: str | None) -> bool:
    """Constant-time comparison of a per-run secret with what a request offers."""
    return offered is not None and hmac.compare_digest(secret.encode(), offered.encode())


@dataclass(frozen=True)
class AccessVerdict:
    """What the guard does with one request: go on (`code` 0), answer `code` with `message`, or (`code` 303)
    redirect to `location` setting the session cookie (the token exchanged)."""

    code: int
    message: str = ""
    location: str = ""
    set_cookie: bool = False


PASS: Final = AccessVerdict(0)


def decide(
    method: str,
    path: str,
    host: str,
    headers: Mapping[str, str],
    query_token: str | None,
    cookie: str | None,
    token: str,
    session: str,
    allowed_hosts: Collection[str],
) -> AccessVerdict:
    """The UI's gate for one request, in order: read-only (405); the `Host` one of ours (403: DNS rebinding);
    nothing from another site (403: `Sec-Fetch-Site` cross-site or same-site, an `Origin` not ours); then the
    user's: the session cookie, an `Authorization: Bearer <token>`, or the token in the query (then the cookie is
    set; on `/` by a redirect that drops the token from the address bar). Anything else: 401."""
    if method not in ("GET", "HEAD"):
        return AccessVerdict(405, "read-only")
    if allowed_hosts and host not in allowed_hosts:
        return AccessVerdict(403, f"unexpected Host {host[:100]!r}")
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return AccessVerdict(403, f"a {site[:20]} request: the UI answers its own page only")
    origin = headers.get("Origin")
    if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
        return AccessVerdict(403, f"a request from {origin[:100]!r}: the UI answers its own page only")
    if matches(session, cookie):
        return PASS
    authorization = headers.get("Authorization", "")
    scheme, _, offered = authorization.partition(" ")
    if scheme.lower() == "bearer" and matches(token, offered.strip()):
        return PASS
    if matches(token, query_token):
        return AccessVerdict(303, location="/", set_cookie=True) if path == "/" else AccessVerdict(0, set_cookie=True)
    return AccessVerdict(
        401,
        "open the URL `trainjob-operator ui` printed (with its ?token=), or send Authorization: Bearer <token>",
    )
