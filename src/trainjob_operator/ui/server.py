"""The UI's HTTP server: static page, JSON reads and server-sent events fed by watches. Read-only: it only ever
GETs and watches, with the user's kubeconfig (so the user's RBAC); it never reads Secrets. It serves its user only
(`ui/access.py`): a per-run token exchanged for a cookie, nothing from other sites or under a foreign Host, the
loopback only unless `--allow-remote`, and every route parameter a valid name before it is put in an API path."""

import argparse
import asyncio
import contextlib
import json
import secrets
import sys
import webbrowser
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from importlib import resources
from typing import Any
from urllib.parse import quote

from aiohttp import web

from .. import flags, logs
from ..api import constants as c
from ..k8s import connection as k8s_config
from ..k8s.client import ApiError, Client
from . import access, view

log = logs.get("trainjob_operator.ui")

TRAINJOBS = f"/apis/{c.API_VERSION}/trainjobs"
JOBSETS = f"/apis/{c.JOBSET_API_VERSION}/jobsets"
LOG_TAIL_LINES = 300
DEBOUNCE_SECONDS = 0.3
STATIC = resources.files("trainjob_operator.ui") / "static"


def _collection(base: str, namespace: str | None) -> str:
    if namespace is None:
        return base
    group, plural = base.rsplit("/", 1)
    return f"{group}/namespaces/{quote(namespace, safe='')}/{plural}"


def _pods(namespace: str, pod: str | None = None, tail: str = "") -> str:
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
    return f"{path}/{quote(pod, safe='')}{tail}" if pod is not None else path


class Cache:
    """A list+watch mirror of one collection; calls `changed(type, obj)` for every event."""

    def __init__(self, client: Client, path: str, changed: Any) -> None:
        self.client, self.path, self.changed = client, path, changed
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.error: str | None = None
        self.synced = asyncio.Event()

    async def run(self) -> None:
        while True:
            try:
                listed = await self.client.request("GET", self.path)
                fresh = {
                    (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in listed.get("items") or []
                }
                for key in set(self.items) - set(fresh):
                    self.changed("DELETED", self.items.pop(key))
                for key, obj in fresh.items():
                    self.items[key] = obj
                    self.changed("MODIFIED", obj)
                self.error = None
                self.synced.set()
                version = (listed.get("metadata") or {}).get("resourceVersion")
                while True:
                    async for event in self.client.watch(self.path, version):
                        kind, obj = event.get("type"), event.get("object") or {}
                        if kind == "ERROR":
                            raise ApiError(int(obj.get("code") or 500), obj.get("reason", ""), obj.get("message", ""))
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        if kind == "BOOKMARK":
                            continue
                        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                        if kind == "DELETED":
                            self.items.pop(key, None)
                        else:
                            self.items[key] = obj
                        self.changed(kind, obj)
            except ApiError as err:
                if err.status != 410:  # an expired resourceVersion only means: list again
                    self.error = f"{err.status} {err.reason}: {err.message}"
                    self.synced.set()
                    log.warning("watch failed", path=self.path, error=self.error)
                    await asyncio.sleep(5)
            except (TimeoutError, OSError, ValueError) as err:
                self.error = str(err) or type(err).__name__
                log.warning("watch interrupted", path=self.path, error=self.error)
                await asyncio.sleep(2)


class UI:
    def __init__(
        self,
        client: Client,
        namespace: str | None = None,
        allowed_hosts: Sequence[str] = (),
        token: str | None = None,
    ) -> None:
        self.client, self.namespace = client, namespace
        self.allowed_hosts = set(allowed_hosts)
        self.token = token or secrets.token_urlsafe(32)
        """Printed in the URL; exchanged for the session cookie."""
        self.session = secrets.token_urlsafe(32)
        self.history = view.History()
        self.listeners: set[asyncio.Queue[dict[str, Any]]] = set()
        self.trainjobs = Cache(client, _collection(TRAINJOBS, namespace), self._trainjob_changed)
        self.jobsets = Cache(client, _collection(JOBSETS, namespace), self._jobset_changed)
        self.tasks: list[asyncio.Task[None]] = []

    # --- change fan-out ---------------------------------------------------------------------------------

    def _broadcast(self, message: dict[str, Any]) -> None:
        for queue in list(self.listeners):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(message)

    def row(self, key: tuple[str, str]) -> dict[str, Any] | None:
        trainjob = self.trainjobs.items.get(key)
        return (
            view.trainjob_row(trainjob, view.own_jobset(trainjob, self.jobsets.items.get(key)))
            if trainjob is not None
            else None
        )

    def _trainjob_changed(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if kind == "DELETED":
            self.history.forget(meta.get("uid", ""))
            self._broadcast({"type": "deleted", "namespace": key[0], "name": key[1]})
            return
        row = view.trainjob_row(obj, view.own_jobset(obj, self.jobsets.items.get(key)))
        self.history.record(row)
        self._broadcast({"type": "row", "row": row})

    def _jobset_changed(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        row = self.row((meta.get("namespace", ""), meta.get("name", "")))
        if row is not None:
            self._broadcast({"type": "row", "row": row})

    # --- reads ----------------------------------------------------------------------------------------

    async def detail(self, namespace: str, name: str) -> dict[str, Any] | None:
        key = (namespace, name)
        trainjob = self.trainjobs.items.get(key)
        if trainjob is None:
            trainjob = await self.client.get(c.API_VERSION, c.TRAINJOB_KIND, name, namespace)
            if trainjob is None:
                return None
        jobset = view.own_jobset(trainjob, self.jobsets.items.get(key))  # a predecessor's is not shown as its own
        problems: list[str] = []

        async def read(what: str, call: Any, default: Any) -> Any:
            try:
                return await call
            except ApiError as err:
                problems.append(f"{what}: {err.status} {err.reason}")
                return default

        pods, events, snapshot = await asyncio.gather(
            read("pods", self.client.list("v1", "Pod", namespace, f"{c.JOBSET_NAME_LABEL}={name}"), []),
            read("events", self.client.list("v1", "Event", namespace), []),
            read("runtime snapshot", self.client.get("v1", "ConfigMap", f"{name}-runtime-snapshot", namespace), None),
        )
        row = view.trainjob_row(trainjob, jobset)
        self.history.record(row)
        pod_rows = view.pods_of(view.own_pods(jobset, pods))
        shown_jobset = view.jobset_view(jobset)
        if shown_jobset is not None:
            shown_jobset["replicatedJobs"] = view.replicated_jobs(jobset, pod_rows)
        return {
            "row": row,
            "conditions": list((trainjob.get("status") or {}).get("conditions") or []),
            "trainjob": view.shown(trainjob),
            "jobset": shown_jobset,
            "jobsetNote": view.jobset_note(trainjob, jobset),
            "pods": pod_rows,
            "events": view.events_of(
                view.own_events(trainjob, events),
                name,
                [p["name"] for p in pod_rows],
                view.replicated_job_names(trainjob, jobset),
            ),
            "snapshot": ((view.own_child(trainjob, snapshot) or {}).get("data") or {}).get("runtime"),
            "history": self.history.of(row["uid"]),
            "goodput": view.goodput_of(trainjob, datetime.now(UTC)),
            "problems": problems,
        }

    # --- HTTP -----------------------------------------------------------------------------------------

    @web.middleware
    async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Read-only, and only for its user's browser (`access.decide`); route parameters checked before use."""
        verdict = access.decide(
            request.method,
            request.path,
            request.host,
            request.headers,
            request.query.get("token"),
            request.cookies.get(access.COOKIE),
            self.token,
            self.session,
            self.allowed_hosts,
        )
        if verdict.code == 303:
            response: web.StreamResponse = web.Response(status=303, headers={"Location": verdict.location})
        elif verdict.code:
            response = web.json_response({"message": verdict.message}, status=verdict.code)
        else:
            problem = access.route_problem({**request.query, **request.match_info})
            if problem is not None:
                response = web.json_response({"message": problem}, status=400)
            else:
                response = await handler(request)
        if verdict.set_cookie:
            response.set_cookie(access.COOKIE, self.session, httponly=True, samesite="Strict", path="/")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("Content-Security-Policy", "default-src 'self'; style-src 'self'")
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    async def index(self, request: web.Request) -> web.Response:
        return web.Response(text=(STATIC / "index.html").read_text(), content_type="text/html")

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        types = {"app.js": "application/javascript", "app.css": "text/css"}
        if name not in types:
            raise web.HTTPNotFound()
        return web.Response(text=(STATIC / name).read_text(), content_type=types[name])

    async def list_rows(self, request: web.Request) -> web.Response:
        await self.trainjobs.synced.wait()
        rows = [
            view.trainjob_row(tj, view.own_jobset(tj, self.jobsets.items.get(k)))
            for k, tj in sorted(self.trainjobs.items.items())
        ]
        return web.json_response({"rows": rows, "error": self.trainjobs.error, "namespace": self.namespace})

    async def get_detail(self, request: web.Request) -> web.Response:
        detail = await self.detail(request.match_info["namespace"], request.match_info["name"])
        if detail is None:
            return web.json_response({"message": "TrainJob not found"}, status=404)
        return web.json_response(detail)

    async def _sse(self, request: web.Request, messages: AsyncIterator[dict[str, Any]]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await response.prepare(request)
        try:
            async for message in messages:
                await response.write(f"data: {json.dumps(message)}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Every TrainJob row as it changes (watch-driven, no polling)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=10000)
        self.listeners.add(queue)

        async def messages() -> AsyncIterator[dict[str, Any]]:
            try:
                yield {"type": "hello"}
                while True:
                    try:
                        yield await asyncio.wait_for(queue.get(), timeout=25)
                    except TimeoutError:
                        yield {"type": "ping"}
            finally:
                self.listeners.discard(queue)

        return await self._sse(request, messages())

    async def detail_stream(self, request: web.Request) -> web.StreamResponse:
        """The whole detail of one TrainJob, again each time it, its JobSet, pods or events change."""
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        wake: asyncio.Queue[str] = asyncio.Queue(maxsize=100)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1000)
        self.listeners.add(queue)

        def nudge(what: str) -> None:
            with contextlib.suppress(asyncio.QueueFull):
                wake.put_nowait(what)

        async def forward() -> None:
            while True:
                message = await queue.get()
                row = message.get("row") or message
                if (row.get("namespace"), row.get("name")) == (namespace, name):
                    nudge("trainjob")

        async def watch(path: str, params: dict[str, str], what: str) -> None:
            while True:
                try:
                    listed = await self.client.request("GET", path, params=params)
                    version = (listed.get("metadata") or {}).get("resourceVersion")
                    async for _ in self.client.watch(path, version, params):
                        nudge(what)
                except (TimeoutError, ApiError, OSError, ValueError):
                    await asyncio.sleep(3)

        tasks = [
            asyncio.create_task(forward()),
            asyncio.create_task(watch(_pods(namespace), {"labelSelector": f"{c.JOBSET_NAME_LABEL}={name}"}, "pods")),
            asyncio.create_task(watch(f"/api/v1/namespaces/{quote(namespace, safe='')}/events", {}, "events")),
        ]

        async def messages() -> AsyncIterator[dict[str, Any]]:
            try:
                while True:
                    detail = await self.detail(namespace, name)
                    yield {"type": "detail", "detail": detail}
                    try:
                        await asyncio.wait_for(wake.get(), timeout=25)
                    except TimeoutError:
                        yield {"type": "ping"}
                        continue
                    await asyncio.sleep(DEBOUNCE_SECONDS)  # coalesce a burst of changes into one update
                    while not wake.empty():
                        wake.get_nowait()
            finally:
                self.listeners.discard(queue)
                for task in tasks:
                    task.cancel()

        return await self._sse(request, messages())

    async def pod_log(self, request: web.Request) -> web.StreamResponse:
        """The tail of one container's log, or (follow=1) the tail and then every new line as an event."""
        namespace, pod = request.match_info["namespace"], request.match_info["pod"]
        pod_obj = await self.client.get("v1", "Pod", pod, namespace)
        labels = ((pod_obj or {}).get("metadata") or {}).get("labels") or {}
        if pod_obj is None or c.JOBSET_NAME_LABEL not in labels:
            return web.json_response({"message": "not a pod of a TrainJob"}, status=404)
        params = {"tailLines": str(LOG_TAIL_LINES)}
        if request.query.get("container"):
            params["container"] = request.query["container"]
        path = _pods(namespace, pod, "/log")
        if request.query.get("follow") != "1":
            try:
                return web.Response(text=await self.client.text(path, params), content_type="text/plain")
            except ApiError as err:
                return web.Response(text=f"(no log: {err.message})", content_type="text/plain")

        async def lines() -> AsyncIterator[dict[str, Any]]:
            try:
                async for line in self.client.stream_lines(path, {**params, "follow": "true"}, read_timeout=3600):
                    yield {"type": "line", "text": line.decode(errors="replace").rstrip("\n")}
            except ApiError as err:
                yield {"type": "line", "text": f"(no log: {err.message})"}
            yield {"type": "end"}

        return await self._sse(request, lines())

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard])
        app.router.add_get("/", self.index)
        app.router.add_get("/static/{name}", self.static)
        app.router.add_get("/api/trainjobs", self.list_rows)
        app.router.add_get("/api/stream", self.stream)
        app.router.add_get("/api/trainjobs/{namespace}/{name}", self.get_detail)
        app.router.add_get("/api/trainjobs/{namespace}/{name}/stream", self.detail_stream)
        app.router.add_get("/api/pods/{namespace}/{pod}/log", self.pod_log)
        return app

    async def start(self) -> None:
        self.tasks = [asyncio.create_task(self.trainjobs.run()), asyncio.create_task(self.jobsets.run())]

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def serve(args: argparse.Namespace) -> None:
    connection = k8s_config.load(args.kubeconfig, args.context)
    async with Client(connection, qps=20, burst=40) as client:
        hosts = [f"{h}:{args.port}" for h in ("127.0.0.1", "localhost", "[::1]", args.address)]
        ui = UI(client, args.namespace, allowed_hosts=() if args.any_host else hosts)
        await ui.start()
        runner = web.AppRunner(ui.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, args.address, args.port)
        await site.start()
        host = "127.0.0.1" if args.address in ("0.0.0.0", "::") else args.address
        url = f"http://{host}:{args.port}/?token={ui.token}"
        print(
            f"trainjob-operator ui: serving {url} (read-only, as {connection.server}; the token is this run's, "
            "for you only); Ctrl-C stops it",
            flush=True,
        )
        if args.open:
            webbrowser.open(url)
        try:
            await asyncio.Event().wait()
        finally:
            await ui.stop()
            await runner.cleanup()


def parser() -> argparse.ArgumentParser:
    p = flags.OneLineParser(
        prog="trainjob-operator ui", description="a read-only web UI over TrainJobs, with your kubeconfig"
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument("-n", "--namespace", help="only this namespace (default: all you may list)")
    p.add_argument("--address", default="127.0.0.1", help="address to listen on (default: the loopback only)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --address (anyone who reaches it and has the token reads as you)",
    )
    p.add_argument("--port", type=flags.port, default=8765, help="port to listen on (default: 8765)")
    p.add_argument(
        "--any-host",
        action="store_true",
        help="accept any Host header (behind kubectl port-forward or a proxy with its own name)",
    )
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    return p


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    refusal = access.remote_refusal(args.address, args.allow_remote)
    if refusal is not None:
        print(f"trainjob-operator ui: error: {refusal}", file=sys.stderr)
        return 2
    logs.configure("console", "WARNING")
    try:
        asyncio.run(serve(args))
    except k8s_config.ConfigError as err:
        print(f"trainjob-operator ui: error: {err}")
        return 2
    except KeyboardInterrupt:
        pass
    return 0
