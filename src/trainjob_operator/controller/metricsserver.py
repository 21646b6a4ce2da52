"""/metrics over TLS with authentication and authorisation (`metrics.auth.enabled`, upstream's setting): each scrape's
bearer token is reviewed by the API server (TokenReview, then SubjectAccessReview for `get` on /metrics); the
decisions live in `runtime.metricsauth`. It serves the webhook certificate (the certificate loop loads it)."""

import asyncio
import hashlib
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..certs import Bundle
from ..config import MetricsConfig
from ..k8s.client import ApiError, KubeClient
from ..logs import get
from ..metrics import Metrics
from ..runtime import metricsauth
from ..runtime.progress import bearer_token
from .admissionserver import load_certificate

log = get("trainjob_operator.metricsserver")
V = TypeVar("V")

CACHE_SIZE = 256
"""Scrapers remembered per verdict (a handful of Prometheus replicas in practice)."""
REFUSAL_SECONDS = 5.0
"""A refusal is remembered briefly: a scraper bound to the reader role a moment ago soon gets in."""
REVIEWS_IN_FLIGHT = 2
"""Reviews sent at once: a flood of unknown tokens waits here instead of fanning out to the API server."""


class MetricsServer:
    def __init__(
        self,
        cfg: MetricsConfig,
        client: KubeClient,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg, self.client, self.metrics, self.clock = cfg, client, metrics, clock
        # Grants and refusals are kept apart: refused tokens, however many, never push a scraper's grant out.
        self.granted: OrderedDict[str, tuple[float, None]] = OrderedDict()
        self.refused: OrderedDict[str, tuple[float, tuple[int, str]]] = OrderedDict()
        self._reviews = asyncio.Semaphore(REVIEWS_IN_FLIGHT)
        self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._runner: web.AppRunner | None = None
        self.started = False

    def load(self, bundle: Bundle) -> None:
        load_certificate(self.ssl, bundle)

    async def _serve(self, request: web.Request) -> web.Response:
        token = bearer_token(request.headers.get("Authorization"))
        if token is None or not metricsauth.plausible(token):
            return _refuse(metricsauth.UNAUTHORIZED)
        try:
            verdict = await self._verdict(token)
        except (ApiError, OSError) as err:
            log.warning("cannot review a scraper's token", error=str(err))
            return web.Response(status=500, text="cannot authenticate the request")
        if verdict is not None:
            return _refuse(verdict)
        body = generate_latest(self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _verdict(self, token: str) -> tuple[int, str] | None:
        """None: may read /metrics; else the refusal. Answers are cached by the token's digest."""
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        granted, refused = self.granted.get(key), self.refused.get(key)
        if granted is not None and granted[0] > now:
            return None
        if refused is not None and refused[0] > now:
            return refused[1]
        async with self._reviews:
            scraper = metricsauth.scraper_of(await self.client.create(metricsauth.token_review(token)))
            if scraper is None:
                return self._remember(self.refused, key, REFUSAL_SECONDS, metricsauth.UNAUTHORIZED)
            if not metricsauth.allowed(await self.client.create(metricsauth.access_review(scraper))):
                log.info("metrics scrape refused", user=scraper.username)
                return self._remember(self.refused, key, REFUSAL_SECONDS, metricsauth.FORBIDDEN)
        return self._remember(self.granted, key, self.cfg.review_cache_seconds, None)

    def _remember(self, cache: "OrderedDict[str, tuple[float, V]]", key: str, seconds: float, verdict: V) -> V:
        seconds = min(seconds, self.cfg.review_cache_seconds)
        if seconds > 0:
            cache[key] = (self.clock() + seconds, verdict)
            cache.move_to_end(key)
            while len(cache) > CACHE_SIZE:
                cache.popitem(last=False)
        return verdict

    async def start(self) -> None:
        app = web.Application(client_max_size=1024)
        app.router.add_get(metricsauth.PATH, self._serve)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.cfg.host, self.cfg.port, ssl_context=self.ssl)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.cfg = self.cfg.model_copy(update={"port": sockets[0].getsockname()[1]})
        self.started = True
        log.info("metrics listening (TLS, authenticated)", host=self.cfg.host, port=self.cfg.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def _refuse(answer: tuple[int, str]) -> web.Response:
    code, text = answer
    return web.Response(status=code, text=text)


__all__ = ["MetricsServer"]
