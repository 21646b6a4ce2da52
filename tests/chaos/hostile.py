"""A hostile network between the operator and the API server: an HTTP reverse proxy on 127.0.0.1 (asyncio, aiohttp)
that injects faults into the operator's requests while `active`, and records what the operator does about them.

The operator gets a kubeconfig pointing at the proxy (plain HTTP on loopback); the proxy forwards to the real API
server over TLS with the cluster's own credentials. Faults, per request (probabilities in `Faults`):

- `latency`: 50-500 ms added before forwarding;
- `reset`: the connection is aborted (RST) before the request is forwarded, or `reset_after` once the API server
  has answered (the write happened, the client never hears of it);
- `half_open`: the request is read and never answered; the connection stays open and silent (the client's timeout
  must end it);
- `throttle`: 429 with `Retry-After`; `error_500`, `error_503` (503 with `Retry-After`); `conflict`: 409 on writes
  (PATCH/PUT);
- watches: `gone` (410, as an HTTP status or as an ERROR event in the stream), `silent` (the stream is opened and
  then nothing is passed on for a while, until the proxy closes it), `slow` (every event delayed), and every watch
  is cut after a while.

`retry_after_violations` counts requests for a path the proxy throttled (429/503 with Retry-After) that arrived
before the time it asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from trainjob_operator.k8s import connection as k8s_config
from trainjob_operator.k8s.client import retry_key


@dataclass
class Faults:
    """Probabilities per request (non-watch) and per watch; the rest is forwarded untouched."""

    latency: float = 0.25
    reset: float = 0.04
    reset_after: float = 0.03
    half_open: float = 0.01
    throttle: float = 0.06
    error_500: float = 0.03
    error_503: float = 0.03
    conflict: float = 0.05
    watch_gone: float = 0.15
    watch_gone_event: float = 0.15
    watch_silent: float = 0.15
    watch_slow: float = 0.15
    retry_after_s: tuple[int, int] = (1, 3)
    half_open_s: float = 45.0
    silent_s: tuple[float, float] = (5.0, 20.0)
    watch_cut_s: tuple[float, float] = (3.0, 15.0)


def _status(code: int, reason: str, message: str, retry_after: int | None = None) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return web.Response(status=code, text=json.dumps(body), content_type="application/json", headers=headers)


class HostileProxy:
    def __init__(self, kubeconfig: str, faults: Faults | None = None, seed: int = 17) -> None:
        self.connection = k8s_config.load(kubeconfig)
        self.faults = faults or Faults()
        self.rng = random.Random(seed)
        self.active = False
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self.retry_after_violations = 0
        self.violations: list[str] = []
        self._not_before: dict[str, float] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.ServerRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._open: set[asyncio.Task[Any]] = set()
        self.port = 0

    # --- life -----------------------------------------------------------------------------------------------

    def start(self) -> HostileProxy:
        logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # aborted connections are the point here
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.connection.ssl_context, limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )
        server = web.Server(self._handle)
        self._runner = web.ServerRunner(server, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])

    def stop(self) -> None:
        async def close() -> None:
            for task in list(self._open):
                task.cancel()
            if self._runner is not None:
                await self._runner.cleanup()
            if self._session is not None:
                await self._session.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def kubeconfig(self, path: Path) -> str:
        """A kubeconfig for the operator: the proxy, plain HTTP on loopback, no credentials of its own."""
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "hostile",
                    "clusters": [{"name": "hostile", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
                    "users": [{"name": "hostile", "user": {}}],
                    "contexts": [{"name": "hostile", "context": {"cluster": "hostile", "user": "hostile"}}],
                }
            )
        )
        return str(path)

    def summary(self) -> dict[str, float]:
        return {f"injected_{k}": float(v) for k, v in sorted(self.injected.items())}

    # --- the proxy --------------------------------------------------------------------------------------------

    def _pick(self, table: list[tuple[str, float]]) -> str | None:
        roll = self.rng.random()
        for name, p in table:
            if roll < p:
                return name
            roll -= p
        return None

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        task = asyncio.current_task()
        if task is not None:
            self._open.add(task)
        try:
            return await self._serve(request)
        finally:
            if task is not None:
                self._open.discard(task)

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        self.requests += 1
        watch = request.query.get("watch") in ("true", "1")
        body = await request.read()
        parsed: Any = None
        if request.method == "POST" and body:
            with contextlib.suppress(ValueError):
                parsed = json.loads(body)
        path = retry_key(request.method, request.path, parsed)
        now = time.monotonic()
        if not watch:
            not_before = self._not_before.get(path)
            if not_before is not None and now < not_before - 0.05:
                self.retry_after_violations += 1
                if len(self.violations) < 20:
                    self.violations.append(f"{request.method} {request.path} {not_before - now:.2f}s early")
        f = self.faults
        if not self.active:
            return await (self._watch(request, None) if watch else self._forward(request, body))
        if watch:
            fault = self._pick(
                [
                    ("watch_gone", f.watch_gone),
                    ("watch_gone_event", f.watch_gone_event),
                    ("watch_silent", f.watch_silent),
                    ("watch_slow", f.watch_slow),
                ]
            )
            if fault is not None:
                self.injected[fault] += 1
            if fault == "watch_gone":
                return _status(410, "Expired", "too old resource version: 1 (2)")
            return await self._watch(request, fault)
        write = request.method in ("PATCH", "PUT")
        fault = self._pick(
            [
                ("latency", f.latency),
                ("reset", f.reset),
                ("reset_after", f.reset_after),
                ("half_open", f.half_open),
                ("throttle", f.throttle),
                ("error_500", f.error_500),
                ("error_503", f.error_503),
                ("conflict", f.conflict if write else 0.0),
            ]
        )
        if fault is not None:
            self.injected[fault] += 1
        if fault == "latency":
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))
        elif fault == "reset":
            return self._abort(request)
        elif fault == "half_open":
            await asyncio.sleep(f.half_open_s)
            return self._abort(request)
        elif fault in ("throttle", "error_503"):
            seconds = self.rng.randint(*f.retry_after_s)
            self._not_before[path] = time.monotonic() + seconds
            if fault == "throttle":
                return _status(
                    429,
                    "TooManyRequests",
                    "the server has received too many requests and has asked us to try again later",
                    seconds,
                )
            return _status(503, "ServiceUnavailable", "the server is currently unable to handle the request", seconds)
        elif fault == "error_500":
            return _status(500, "InternalError", "Internal error occurred: injected by the hostile proxy")
        elif fault == "conflict":
            return _status(
                409,
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please "
                "apply your changes to the latest version and try again",
            )
        response = await self._forward(request, body)
        if fault == "reset_after":
            return self._abort(request)
        return response

    def _abort(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=499)  # never written: the connection is gone

    def _upstream_headers(self, request: web.BaseRequest) -> dict[str, str]:
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("accept", "content-type", "user-agent")}
        authorization = self.connection.header()
        if authorization:
            headers["Authorization"] = authorization
        return headers

    async def _forward(self, request: web.BaseRequest, body: bytes) -> web.Response:
        assert self._session is not None
        url = self.connection.server + request.path_qs
        try:
            async with self._session.request(
                request.method,
                url,
                data=body or None,
                headers=self._upstream_headers(request),
                timeout=aiohttp.ClientTimeout(total=60),
            ) as upstream:
                payload = await upstream.read()
                headers = {k: v for k, v in upstream.headers.items() if k in ("Content-Type", "Retry-After")}
                return web.Response(status=upstream.status, body=payload, headers=headers)
        except (aiohttp.ClientError, TimeoutError, OSError):
            return _status(503, "ServiceUnavailable", "the hostile proxy cannot reach the API server")

    async def _watch(self, request: web.BaseRequest, fault: str | None) -> web.StreamResponse:
        """Forward a watch; while the proxy is active (whenever it turns so), the stream is cut after a while, and a
        `watch_silent` one swallows everything until it is cut, a `watch_slow` one delays every event."""
        assert self._session is not None
        f = self.faults
        url = self.connection.server + request.path_qs
        cut_at: float | None = None
        silent = fault == "watch_silent"
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        try:
            async with self._session.get(url, headers=self._upstream_headers(request)) as upstream:
                if upstream.status != 200:
                    payload = await upstream.read()
                    return web.Response(
                        status=upstream.status,
                        body=payload,
                        headers={"Content-Type": upstream.headers.get("Content-Type", "application/json")},
                    )
                await response.prepare(request)
                if fault == "watch_gone_event":
                    await asyncio.sleep(self.rng.uniform(0.0, 2.0))
                    error = {
                        "type": "ERROR",
                        "object": {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "status": "Failure",
                            "message": "too old resource version: 1 (2)",
                            "reason": "Expired",
                            "code": 410,
                        },
                    }
                    await response.write(json.dumps(error).encode() + b"\n")
                    return response
                while True:
                    if self.active and cut_at is None:
                        cut_at = time.monotonic() + self.rng.uniform(*(f.silent_s if silent else f.watch_cut_s))
                    if cut_at is not None and time.monotonic() >= cut_at:
                        if fault is None:
                            self.injected["watch_cut"] += 1
                        break
                    try:
                        line = await asyncio.wait_for(upstream.content.readline(), 1.0)
                    except TimeoutError:
                        continue
                    if not line:
                        break
                    if silent:
                        continue  # swallowed: the stream looks alive and says nothing, then is cut
                    if fault == "watch_slow":
                        await asyncio.sleep(self.rng.uniform(0.2, 1.5))
                    await response.write(line)
        except (aiohttp.ClientError, TimeoutError, OSError, ConnectionResetError):
            pass
        return response
