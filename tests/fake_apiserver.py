"""A fake Kubernetes API server on 127.0.0.1 for tests that run real client code (kopf's, ours) over real HTTP.

It serves what a test gives it: objects (read one by one, or listed in pages by `limit`/`continue`, with discovery
for their kinds), watch streams scripted line by line (events, an in-stream ERROR, a line cut in half, the stream
left open), answers forced on the next requests that match (a 503 with Retry-After, a 410, a 404), and, if told,
only some bearer tokens (401 for the others). Every request is recorded with its arrival time. Optionally over TLS with a certificate for a name that is not the address it listens on, as an API
server reached through a tunnel is (`tls-server-name`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from trainjob_operator import certs


@dataclass(frozen=True)
class Kind:
    """A collection the server serves, as discovery names it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    at: float

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("true", "1")


@dataclass
class Answer:
    """Forced on the next `times` requests that `matches` (then the server answers normally again)."""

    matches: Callable[[Seen], bool]
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    times: int = 1


VERSION = {"major": "1", "minor": "36", "gitVersion": "v1.36.3"}
"""What `/version` answers."""

CUT = object()
"""In a watch script: half a JSON line, then the stream ends (a proxy that cut it mid-line and ended it cleanly)."""

DROP = object()
"""In a watch script: the connection is dropped (no end of the chunked body)."""

HANG = object()
"""In a watch script: the stream stays open without events until the server stops (the default end)."""

END = object()
"""In a watch script: the server ends the stream cleanly (a watch timeout)."""


def status(code: int, message: str, reason: str = "", retry_after: int | None = None) -> dict[str, Any]:
    details = {"retryAfterSeconds": retry_after} if retry_after is not None else {}
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message, "details": details}  # fmt: skip


def error_event(code: int, message: str) -> dict[str, Any]:
    """An ERROR event as the API server writes it into a watch stream."""
    return {"type": "ERROR", "object": status(code, message)}


BUILT_IN = [
    Kind("", "v1", "namespaces", "Namespace", namespaced=False),
    Kind("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False),
]
"""Always discoverable (kopf's resource observer waits for the CRD kind before it starts any watch)."""


class FakeApiServer:
    def __init__(
        self, kinds: list[Kind] | None = None, tls_name: str | None = None, tokens: tuple[str, ...] | None = None
    ) -> None:
        self.kinds = [*BUILT_IN, *(kinds or [])]
        self.tokens = tokens
        """Bearer tokens accepted (None: any request); others are answered 401."""
        self.objects: dict[str, list[dict[str, Any]]] = {}
        """Collection path (`/apis/g/v/plural`, namespaced ones also per namespace) → its objects."""
        self.watches: dict[str, list[list[Any]]] = {}
        """Collection path → the scripts of its next watch requests (one per request; then HANG)."""
        self.answers: list[Answer] = []
        self.seen: list[Seen] = []
        self.resource_version = 100
        self.tls_name = tls_name
        self.bundle: certs.Bundle | None = None
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self._dir = tempfile.TemporaryDirectory()
        self.url = ""

    # --- what a test sets up ----------------------------------------------------------------------------------

    def add(self, kind: Kind, *objects: dict[str, Any]) -> None:
        """Objects of `kind` (each with metadata.name, and metadata.namespace if namespaced)."""
        for obj in objects:
            self.resource_version += 1
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
            obj["apiVersion"] = f"{kind.group}/{kind.version}" if kind.group else kind.version
            obj["kind"] = kind.kind
            self.objects.setdefault(f"{kind.prefix}/{kind.plural}", []).append(obj)

    def script_watch(self, kind: Kind, *lines: Any) -> None:
        """The next watch request of `kind` (all namespaces or one) streams `lines`: event dicts, CUT, DROP, END or
        HANG."""
        self.watches.setdefault(kind.plural, []).append(list(lines))

    def answer(
        self,
        matches: Callable[[Seen], bool],
        code: int,
        retry_after: str | None = None,
        times: int = 1,
        message: str | None = None,
    ) -> None:
        """The next `times` requests that `matches` are answered `code` (in the order the answers were given)."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self.answers.append(Answer(matches, code, headers, status(code, message or f"forced {code}"), times))

    def requests(self, plural: str, watch: bool | None = None) -> list[Seen]:
        return [
            s for s in self.seen if s.path.rstrip("/").endswith(f"/{plural}") and (watch is None or s.watch == watch)
        ]

    def end_streams(self) -> None:
        """End the watch streams left open (HANG): kopf, stopping, waits up to 5 s for every task started after it,
        which includes this server's handlers when it runs in the test's event loop."""
        self._stopping.set()

    # --- life -------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeApiServer:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        context = None
        if self.tls_name is not None:
            self.bundle = certs.generate([self.tls_name], dt.datetime.now(dt.UTC))
            cert, key = Path(self._dir.name, "tls.crt"), Path(self._dir.name, "tls.key")
            cert.write_bytes(self.bundle.cert)
            key.write_bytes(self.bundle.key)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert, key)
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        port = self._runner.addresses[0][1]  # the port the OS chose (the one site's socket)
        self.url = f"{'https' if context else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
        self._dir.cleanup()

    # --- serving ----------------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        seen = Seen(request.method, request.path, dict(request.query), dict(request.headers), time.monotonic())
        self.seen.append(seen)
        if self.tokens is not None and seen.headers.get("Authorization") not in [f"Bearer {t}" for t in self.tokens]:
            return web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401)
        for answer in self.answers:
            if answer.times > 0 and answer.matches(seen):
                answer.times -= 1
                return web.json_response(answer.body, status=answer.status, headers=answer.headers)
        if request.path == "/version":
            return web.json_response(VERSION)
        discovery = self._discovery(request.path)
        if discovery is not None:
            return web.json_response(discovery)
        kind, namespace = self._collection(request.path)
        if kind is None:
            return self._object(request.path)
        if seen.watch:
            return await self._watch(request, kind)
        return self._list(kind, namespace, seen.query)

    def _discovery(self, path: str) -> dict[str, Any] | None:
        if path == "/api":
            return {"kind": "APIVersions", "versions": sorted({k.version for k in self.kinds if not k.group})}
        if path == "/apis":
            groups: dict[str, list[str]] = {}
            for k in self.kinds:
                if k.group:
                    groups.setdefault(k.group, []).append(k.version)
            return {
                "kind": "APIGroupList",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                        "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                    }
                    for g, vs in groups.items()
                ],
            }
        kinds = [k for k in self.kinds if k.prefix == path]
        if not kinds:
            return None
        return {
            "kind": "APIResourceList",
            "groupVersion": path.removeprefix("/apis/").removeprefix("/api/"),
            "resources": [
                {
                    "name": k.plural,
                    "singularName": k.kind.lower(),
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                    "verbs": ["get", "list", "watch"],
                }
                for k in kinds
            ],
        }

    def _collection(self, path: str) -> tuple[Kind | None, str | None]:
        for k in self.kinds:
            if path == f"{k.prefix}/{k.plural}":
                return k, None
            head, _, tail = path.removeprefix(f"{k.prefix}/namespaces/").partition("/")
            if k.namespaced and path.startswith(f"{k.prefix}/namespaces/") and tail == k.plural:
                return k, head
        return None, None

    def _object(self, path: str) -> web.Response:
        collection, _, name = path.rpartition("/")
        kind, namespace = self._collection(collection)
        found = [
            o
            for o in (self.objects.get(f"{kind.prefix}/{kind.plural}", []) if kind is not None else [])
            if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace
        ]
        if not found:
            return web.json_response(status(404, f"{path} not found", "NotFound"), status=404)
        return web.json_response(found[0])

    def _list(self, kind: Kind, namespace: str | None, query: dict[str, str]) -> web.Response:
        items = [
            o
            for o in self.objects.get(f"{kind.prefix}/{kind.plural}", [])
            if namespace is None or o["metadata"].get("namespace") == namespace
        ]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or len(items) or 1)
        page = items[start : start + limit]
        more = start + limit < len(items)
        return web.json_response(
            {
                "kind": f"{kind.kind}List",
                "apiVersion": f"{kind.group}/{kind.version}" if kind.group else kind.version,
                "metadata": {"resourceVersion": str(self.resource_version), **({"continue": str(start + limit)} if more else {})},
                "items": page,
            }
        )  # fmt: skip

    async def _watch(self, request: web.Request, kind: Kind) -> web.StreamResponse:
        scripts = self.watches.get(kind.plural) or []
        lines = scripts.pop(0) if scripts else [HANG]
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for line in lines:
            if line is CUT:
                await response.write(b'{"type": "MODIFIED", "object": {"metad')
                break
            if line is DROP:
                assert request.transport is not None
                request.transport.close()
                return response
            if line is END:
                break
            if line is HANG:
                with contextlib.suppress(asyncio.CancelledError):
                    await self._stopping.wait()
                return response
            await response.write(json.dumps(line).encode() + b"\n")
        await response.write_eof()
        return response
