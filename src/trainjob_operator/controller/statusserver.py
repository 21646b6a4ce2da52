"""The TrainJob status server: HTTPS, upstream's route and answers, so `kubeflow.trainer.update_trainjob_status()`
works unmodified from a training pod. Every request is authenticated by the API server (TokenReview, with the
TrainJob's audience) and authorized against the pod the token is bound to; decisions live in `runtime.progress`.
Runs on every replica (no leader election), as upstream's.

Cheap under abuse (issue 33): a token that cannot pass a TokenReview (shape, size, audience, expiry: read from the
token, unverified) is refused before any API call; TokenReviews are bounded in flight and per second, overall and
per caller address (beyond: 429); grants and refusals are cached apart, so garbage never evicts a grant; a body is
read within a deadline and a size bound."""

import asyncio
import hashlib
import ssl
import time
from collections.abc import Callable

from aiohttp import web

from ..api import constants as c
from ..certs import Bundle
from ..config import StatusServerConfig
from ..k8s.client import ApiError, KubeClient
from ..logs import Aggregator, get
from ..metrics import Metrics
from ..runtime import progress
from .admissionserver import load_certificate
from .store import Store

log = get("trainjob_operator.statusserver")

REVIEW_CACHE_SIZE = 4096


class StatusServer:
    def __init__(
        self,
        cfg: StatusServerConfig,
        client: KubeClient,
        store: Store,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.cfg, self.client, self.store, self.metrics = cfg, client, store, metrics
        self.clock, self.wall = clock, wall
        self.limits = progress.RateLimits(cfg.qps, cfg.burst)
        self.reviews = progress.ReviewCache(REVIEW_CACHE_SIZE, REVIEW_CACHE_SIZE)
        self.budget = progress.ReviewBudget(
            cfg.review_qps, cfg.review_burst, cfg.review_in_flight, cfg.review_client_qps, cfg.review_client_burst
        )
        self.budget_log = Aggregator()
        self.in_flight = 0
        self.token_reviews = 0
        """TokenReviews sent since start (the API server counts them too: `apiserver_request_total`)."""
        self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._runner: web.AppRunner | None = None
        self.started = False

    def load(self, bundle: Bundle) -> None:
        load_certificate(self.ssl, bundle)

    # --- one request --------------------------------------------------------------------------------------

    async def _serve(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        answer, body = await self._answer(request)
        self.metrics.status_updates.labels(code=str(answer.code)).inc()
        self.metrics.status_update_seconds.observe(time.perf_counter() - started)
        if body is not None:
            return web.Response(body=body, status=200, content_type="application/json")
        response = web.json_response(answer.body, status=answer.code)
        if answer.code in (408, 413):  # the rest of the body is never read: the connection is not reused
            response.force_close()
        return response

    async def _read_body(self, request: web.Request) -> bytes | progress.Answer:
        """The body, at most `max_body_bytes`, within `body_timeout_seconds` (a slow body gets 408)."""
        limit = self.cfg.max_body_bytes
        raw = b""
        try:
            async with asyncio.timeout(self.cfg.body_timeout_seconds):
                while len(raw) <= limit:  # chunked bodies have no length: read at most one byte past the limit
                    chunk = await request.content.read(limit + 1 - len(raw))
                    if not chunk:
                        break
                    raw += chunk
        except TimeoutError:
            return progress.REQUEST_TIMEOUT
        return progress.TOO_LARGE if len(raw) > limit else raw

    async def _answer(self, request: web.Request) -> tuple[progress.Answer, bytes | None]:
        if request.content_length is not None and request.content_length > self.cfg.max_body_bytes:
            return progress.TOO_LARGE, None
        target = progress.parse_path(request.path) if request.method == "POST" else None
        if target is None:
            return progress.NOT_FOUND, None
        namespace, name = target
        token = progress.bearer_token(request.headers.get("Authorization"))
        if token is None:
            return progress.FORBIDDEN, None
        why = progress.prefilter(token, progress.token_audience(namespace, name), self.wall())
        if why is not None:  # costs nothing: no API call, no cache entry
            return progress.FORBIDDEN, None
        raw = await self._read_body(request)
        if isinstance(raw, progress.Answer):
            return raw, None
        try:
            allowed = await self._authorized(token, namespace, name, request.remote or "")
        except ApiError as err:
            if err.not_found:
                return progress.TRAINJOB_NOT_FOUND, None
            log.warning("cannot authenticate a status update", namespace=namespace, name=name, error=str(err))
            return progress.INTERNAL_ERROR, None
        if allowed is None:
            return progress.TOO_MANY_REQUESTS, None
        if not allowed:
            return progress.FORBIDDEN, None
        if not self.limits.allow(target, self.clock()):
            return progress.TOO_MANY_REQUESTS, None
        try:
            update = progress.parse_update(raw)
        except progress.PayloadError as err:
            log.info("invalid status update", namespace=namespace, name=name, error=str(err))
            return progress.INVALID_PAYLOAD, None
        if update is None:
            return progress.Answer(200, {}), raw  # nothing to write: the request echoed, as upstream
        try:
            await self.client.apply(
                progress.status_apply(namespace, name, update), c.STATUS_FIELD_MANAGER, force=True, subresource="status"
            )
        except ApiError as err:
            if err.status in (400, 422):
                return progress.invalid(err.message or f"Validation failed: {err}"), None
            if err.not_found:
                return progress.TRAINJOB_NOT_FOUND, None
            log.warning("cannot write trainerStatus", namespace=namespace, name=name, error=str(err))
            return progress.INTERNAL_ERROR, None
        return progress.Answer(200, {}), raw

    # --- authentication and authorization -----------------------------------------------------------------

    async def _authorized(self, token: str, namespace: str, name: str, client: str) -> bool | None:
        """Whether the token may write this TrainJob's progress; None when the TokenReview budget is spent (the
        caller is told to retry later, nothing is cached)."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        # The incarnation is part of the key: a verdict for a TrainJob deleted and created again under its name
        # (a pod of the predecessor, still running while the garbage collector is late) never lets that pod
        # write the new TrainJob's progress.
        known = self.store.trainjobs.get((namespace, name))
        key = (digest, namespace, name, ((known or {}).get("metadata") or {}).get("uid"))
        now = self.clock()
        cached = self.reviews.get(key, now)
        if cached is not None:
            return cached
        why = self.budget.admit(client, now, self.in_flight)
        if why is not None:
            if self.budget_log.admit("budget") is not None:
                log.warning("TokenReview budget spent; status update answered 429", why=why)
            return None
        self.in_flight += 1
        try:
            verdict = await self._review(token, namespace, name)
        finally:
            self.in_flight -= 1
        # A refusal is remembered briefly only: a pod whose JobSet this replica has not seen yet soon may write.
        ttl = self.cfg.review_cache_seconds if verdict.allowed else min(self.cfg.review_cache_seconds, 5.0)
        expiry = progress.token_expiry(token)
        if expiry is not None:
            ttl = min(ttl, expiry - self.wall())
        self.reviews.put(key, verdict.allowed, now + ttl, now)
        return verdict.allowed

    async def _review(self, token: str, namespace: str, name: str) -> progress.Verdict:
        audience = progress.token_audience(namespace, name)
        self.token_reviews += 1
        review = await self.client.create(progress.token_review(token, audience))
        caller = progress.caller_of(review)
        pod = jobset = trainjob = None
        if caller.authenticated and caller.pod_name:
            pod = await self.client.get("v1", "Pod", caller.pod_name, namespace)
        if caller.authenticated:
            trainjob = self.store.trainjobs.get((namespace, name)) or await self.client.get(
                c.API_VERSION, c.TRAINJOB_KIND, name, namespace
            )
            if trainjob is None:
                raise ApiError(404, "NotFound", f"TrainJob {namespace}/{name} not found")
            jobset = self.store.jobsets.get((namespace, name)) or await self.client.get(
                c.JOBSET_API_VERSION, c.JOBSET_KIND, name, namespace
            )
        uid = ((trainjob or {}).get("metadata") or {}).get("uid")
        verdict = progress.authorize(caller, namespace, name, pod, jobset, uid)
        if not verdict.allowed:
            log.info(
                "status update refused", namespace=namespace, name=name, why=verdict.why, user=caller.username or None
            )
        return verdict

    # --- lifecycle ------------------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=self.cfg.max_body_bytes)
        app.router.add_route("*", "/{path:.*}", self._serve)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.cfg.host, self.cfg.port, ssl_context=self.ssl)
        await site.start()
        self.started = True
        log.info("status server listening", host=self.cfg.host, port=self.cfg.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def base_url(
    cfg: StatusServerConfig, webhook_service: str | None, webhook_url_host: str | None, operator_namespace: str
) -> str:
    """What trainer pods are told to call: the Service in a cluster, else the configured host."""
    if webhook_service:
        return f"https://{webhook_service}.{operator_namespace}.svc:{cfg.port}"
    host = cfg.url_host or webhook_url_host or cfg.host
    return f"https://{host}:{cfg.url_port or cfg.port}"


__all__ = ["StatusServer", "base_url"]
