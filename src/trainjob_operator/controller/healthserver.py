"""/healthz, /readyz and /metrics on one plain-HTTP port (/metrics not here with `metrics.auth.enabled`: it is
served over TLS, authenticated, by `metricsserver.py`)."""

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..logs import get
from ..metrics import Metrics

log = get("trainjob_operator.health")


class HealthServer:
    def __init__(
        self,
        host: str,
        port: int,
        metrics: Metrics,
        ready: Callable[[], tuple[bool, str]],
        live: Callable[[], tuple[bool, str]] = lambda: (True, "ok"),
        serve_metrics: bool = True,
    ) -> None:
        self.host, self.port, self.metrics, self.ready, self.live = host, port, metrics, ready, live
        self.serve_metrics = serve_metrics
        self._runner: web.AppRunner | None = None

    async def _healthz(self, _: web.Request) -> web.Response:
        ok, why = self.live()
        return web.Response(text="ok" if ok else why, status=200 if ok else 503)

    async def _readyz(self, _: web.Request) -> web.Response:
        ok, why = self.ready()  # the body says what it waits for, or how it serves (leader or standing by)
        return web.Response(text=why, status=200 if ok else 503)

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        if self.serve_metrics:
            app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("health and metrics listening", host=self.host, port=self.port)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
