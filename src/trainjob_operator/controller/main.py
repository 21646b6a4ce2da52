"""`trainjob-operator run`: the controller manager. kopf watches and feeds the caches; our queue reconciles."""

import argparse
import asyncio
import contextlib
import ctypes
import functools
import gc
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from .. import config as config_module
from .. import logs
from ..api import constants as c
from ..certs import Bundle
from ..config import OperatorConfig
from ..k8s import config as k8s_config
from ..k8s.client import RETRY_AFTER_CAP, ApiError, Client, is_transient, parse_retry_after, retry_after
from ..metrics import Metrics
from ..runtime import startup
from ..runtime.errors import describe
from ..runtime.framework import ChildKind
from ..runtime.observed import StatusServer as StatusEndpoint
from ..runtime.pipeline import Framework
from ._kopf import kopf
from .admission import AdmissionServer, keep_webhooks_current
from .health import HealthServer
from .leader import LeaderElector
from .queue import WorkQueue
from .reconciler import NotLeading, Reconciler, utcnow
from .runtimes import RuntimeResolver
from .startup import StartupError, preflight
from .statusserver import StatusServer, base_url
from .store import Key, Store, key_of
from .webhooks import Webhooks

log = logs.get("trainjob_operator.manager")


@dataclass
class Manager:
    cfg: OperatorConfig
    client: Client
    metrics: Metrics = field(default_factory=Metrics)
    store: Store = field(default_factory=Store)
    framework: Framework = field(default_factory=Framework.from_registry)
    queue: WorkQueue[Key] = field(default_factory=WorkQueue)
    elector: LeaderElector | None = None
    webhooks_ready: asyncio.Event = field(default_factory=asyncio.Event)
    kopf_ready: asyncio.Event = field(default_factory=asyncio.Event)
    states: dict[Key, str] = field(default_factory=dict)
    state_counts: dict[str, int] = field(default_factory=dict)
    states_changed: asyncio.Event = field(default_factory=asyncio.Event)
    status_ca: str | None = None
    """The CA of the status server's certificate once settled (what trainer pods trust)."""
    preflight_done: bool = False
    fatal: str | None = None
    """Why the operator stops after starting (the API server cannot reach its webhooks)."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    sync: startup.CacheSync = field(default_factory=startup.CacheSync)
    failures: logs.Aggregator = field(default_factory=logs.Aggregator)
    dead: list[str] = field(default_factory=list)
    """Background tasks that ended: the operator is not live any more and stops."""
    synced: bool = False

    def __post_init__(self) -> None:
        self.watched = self.framework.watched()
        self.runtimes = RuntimeResolver(self.client, self.store)
        self.reconciler = Reconciler(
            self.client,
            self.store,
            self.framework,
            self.metrics,
            status_server=self.status_endpoint,
            may_write=self.leading,
            runtimes=self.runtimes,
        )
        self.sync.resources = tuple(
            cache_name(plural, ns) for plural, ns in watched_collections(self.cfg.namespaces, self.watched)
        )

    def status_endpoint(self) -> StatusEndpoint | None:
        if not self.cfg.status_server.enabled:
            return None
        webhook = self.cfg.webhook
        return StatusEndpoint(
            base_url(self.cfg.status_server, webhook.service_name, webhook.url_host, self.cfg.operator_namespace),
            self.status_ca,
        )

    def on_bundle(self, bundle: Bundle) -> None:
        self.status_ca = bundle.ca_cert.decode()

    # --- events from kopf's watches -----------------------------------------------------------------

    def _seen(self, plural: str, event: dict[str, Any], key: Key) -> None:
        """kopf marks the objects of its initial listing with type None; live watch events carry a type."""
        self.sync.seen(cache_name(plural, key[0] if self.cfg.namespaces else None), event.get("type") is None)

    def on_trainjob(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        key = key_of(obj)
        self._seen("trainjobs", event, key)
        if event.get("type") == "DELETED":
            if self.store.trainjobs.removed(obj):  # this incarnation's: its successor's state stays counted
                self._count_state(self.states.pop(key, None), None)
            self.store.known.forget((obj.get("metadata") or {}).get("uid", ""))
            return
        self.store.trainjobs.put(obj)
        state = (obj.get("status") or {}).get("state") or c.STATE_PENDING
        self._count_state(self.states.get(key), state)
        self.states[key] = state
        self.queue.add(key)

    def _count_state(self, old: str | None, new: str | None) -> None:
        """The TrainJobs-by-state counts, kept as events arrive (no periodic walk over thousands of TrainJobs)."""
        if old == new:
            return
        if old is not None:
            self.state_counts[old] = self.state_counts.get(old, 1) - 1
        if new is not None:
            self.state_counts[new] = self.state_counts.get(new, 0) + 1
        self.states_changed.set()

    def on_child(self, kind: ChildKind, event: dict[str, Any]) -> None:
        """A watched child kind (JobSets): cached, and its controlling TrainJob queued."""
        obj = event.get("object") or {}
        key = key_of(obj)
        self._seen(kind.plural, event, key)
        cache = self.store.children[(kind.api_version, kind.kind)]
        if event.get("type") == "DELETED":
            cache.removed(obj)
        else:
            cache.put(obj)
        for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("controller") and owner.get("kind") == c.TRAINJOB_KIND:
                self.queue.add((key[0], owner.get("name", "")))

    def on_runtime(self, event: dict[str, Any], cluster: bool) -> None:
        obj = event.get("object") or {}
        cache = self.store.cluster_runtimes if cluster else self.store.runtimes
        self._seen(
            "clustertrainingruntimes" if cluster else "trainingruntimes", event, ("", "") if cluster else key_of(obj)
        )
        if event.get("type") == "DELETED":
            cache.removed(obj)
        else:
            cache.put(obj)

    # --- the work loop ------------------------------------------------------------------------------

    def leading(self) -> bool:
        return self.elector is None or self.elector.leading()

    def may_reconcile(self) -> bool:
        """The leader reconciles, once the status server's CA is known (trainer pods get it at build time) and the
        caches hold the initial listings (as controller-runtime waits for its informers): a TrainJob reconciled
        before its JobSet is cached looks unbuilt, and a restart would send every build's writes again."""
        return (
            self.caches_synced()
            and self.leading()
            and (not self.cfg.status_server.enabled or self.status_ca is not None)
        )

    def caches_synced(self) -> bool:
        """Every watch's initial listing has reached the caches (stays true once it is)."""
        if not self.synced:
            self.synced = self.kopf_ready.is_set() and not self.sync.pending()
            if self.synced:
                log.info("caches synced", resources=sorted(self.sync.resources))
        return self.synced

    def on_leadership(self, leader: bool) -> None:
        self.metrics.leader.set(1 if leader else 0)
        if leader:
            for key in self.store.trainjobs.snapshot_keys():
                self.queue.add(key)

    async def work(self, key: Key) -> None:
        try:
            result = await self.reconciler.reconcile(key)
        except NotLeading:  # leadership ended mid-pass: nothing was written; the next leader takes the key
            self.queue.add(key)
            return
        except Exception as err:  # never let one TrainJob stop the operator: log, back off, retry
            self.log_failure(key, err)
            self.queue.add_after(key, max(self.queue.backoff(key), retry_after(err) or 0.0))
            return
        if result.error:
            self.queue.add_after(key, self.queue.backoff(key))
            return
        self.queue.forget(key)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)

    def log_failure(self, key: Key, err: Exception) -> None:
        """API errors (an outage, throttling) are aggregated: one line per kind of error per window, with the count
        of the others; anything else is a bug and is logged with its traceback (also at most once per window)."""
        transient = is_transient(err)
        suppressed = self.failures.admit(type(err).__name__ if transient else f"{type(err).__name__}: {err}"[:300])
        self.metrics.reconcile_failures.labels(error=type(err).__name__).inc()
        if suppressed is None:
            return
        fields = {"namespace": key[0], "name": key[1], "suppressed": suppressed, **logs.error_fields(err)}
        if transient:
            log.warning("reconcile failed: API server unreachable or refusing", **fields)
        else:
            log.error("reconcile crashed", exc_info=err, **fields)

    def liveness(self) -> tuple[bool, str]:
        if self.dead:
            return False, f"background task ended: {', '.join(self.dead)}"
        if self.elector is not None:
            stuck = self.elector.heartbeat_age()
            limit = self.elector.renew_deadline + self.elector.retry_period + 30
            if stuck > limit:
                return False, f"leader election loop stuck for {stuck:.0f}s"
        return True, "ok"

    def readiness(self) -> tuple[bool, str]:
        pending = self.sync.pending() if self.kopf_ready.is_set() else ("watches not started",)
        elector = self.elector
        return startup.readiness(
            startup.Readiness(
                preflight_done=self.preflight_done,
                pending_caches=pending,
                webhooks_enabled=self.cfg.webhook.enabled,
                webhooks_registered=self.webhooks_ready.is_set(),
                status_server=self.cfg.status_server.enabled,
                leader_election=elector is not None,
                leader=elector is not None and elector.is_leader,
                holder=elector.holder if elector is not None else None,
                lease=f"{self.cfg.operator_namespace}/{self.cfg.leader_election.lease_name}",
            )
        )

    async def count_states(self, interval: float = 10, trim_every: float = 60) -> None:
        """The TrainJobs-by-state gauge, at most every `interval` seconds and only when a count changed; once changes
        stop for an interval, memory freed meanwhile goes back to the system (the initial listing of thousands of
        objects is parsed at once, and glibc keeps freed heap otherwise; trimming walks the heap, so at most every
        `trim_every` seconds). Nothing runs while nothing changes: an idle operator uses no CPU."""
        trim = _malloc_trim()
        last_trim = -trim_every
        loop = asyncio.get_running_loop()
        while True:
            await self.states_changed.wait()
            self.states_changed.clear()
            self.metrics.record_states(self.state_counts)
            await asyncio.sleep(interval)
            while not self.states_changed.is_set():  # quiet: trim once, when the last trim is old enough
                wait = last_trim + trim_every - loop.time()
                if wait <= 0:
                    trim()
                    last_trim = loop.time()
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.states_changed.wait(), wait)


TRAINER_WATCHED = (("trainjobs", True), ("trainingruntimes", True), ("clustertrainingruntimes", False))
"""The trainer's own kinds kopf watches (plural, namespaced); the child kinds come from the plugin registry."""


def watched_collections(namespaces: Sequence[str], children: Sequence[ChildKind] = ()) -> list[tuple[str, str | None]]:
    """(plural, namespace or None for cluster-wide) of every watch kopf runs: the TrainJobs, the watched child
    kinds, the runtimes."""
    watched = [TRAINER_WATCHED[0], *((k.plural, True) for k in children), *TRAINER_WATCHED[1:]]
    return [
        (plural, ns) for plural, namespaced in watched for ns in (namespaces if namespaced and namespaces else [None])
    ]


def cache_name(plural: str, namespace: str | None) -> str:
    return f"{plural} in {namespace}" if namespace and plural != "clustertrainingruntimes" else plural


def plan_of(cfg: OperatorConfig) -> startup.Plan:
    return startup.Plan(
        operator_namespace=cfg.operator_namespace,
        namespaces=tuple(cfg.namespaces),
        webhooks=cfg.webhook.enabled,
        leader_election=cfg.leader_election.enabled,
        status_server=cfg.status_server.enabled,
        lease_name=cfg.leader_election.lease_name,
        cert_secret_name=cfg.webhook.cert_secret_name,
        webhook_configurations=(cfg.webhook.validating_name, cfg.webhook.mutating_name),
        streaming_lists=cfg.client.streaming_lists == "auto",
    )


def _malloc_trim() -> Callable[[], None]:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return lambda: libc.malloc_trim(0) and None
    except (OSError, AttributeError):  # not glibc: nothing to do
        return lambda: None


class NoDiffBase(kopf.DiffBaseStorage):
    """We only use event handlers: no change detection, so no essence is built (kopf deep-copies every body for it)
    and nothing is ever written to our objects."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


LIST_CHUNK = 500
"""Objects per page of a watch's initial listing: one page's bodies in memory at a time, not 5,000 (the peak RSS
of a restart)."""

WATCH_RESTART_PAUSE = 1.0
"""Seconds between a watch stream that failed on the API server's side and its next listing (no spinning)."""


Sink = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Direct:
    """Where one watched kind's stream goes (see `resilient_watch`)."""

    event: Sink
    listed: Callable[[str | None], None]
    """Called with the namespace (None: cluster-wide) once a listing's objects have all gone to `event`."""


DIRECT: dict[tuple[str, str], Direct] = {}
"""(API group, plural) → the manager's handlers, called straight from the watch stream."""


def direct_sinks(manager: "Manager") -> dict[tuple[str, str], Direct]:
    """Every watched kind's handlers, by (API group, plural)."""

    def listed(plural: str) -> Callable[[str | None], None]:
        return lambda namespace: manager.sync.complete(cache_name(plural, namespace))

    handlers: dict[tuple[str, str], Direct] = {
        (c.GROUP, "trainjobs"): Direct(manager.on_trainjob, listed("trainjobs")),
        (c.GROUP, "trainingruntimes"): Direct(
            lambda event: manager.on_runtime(event, cluster=False), listed("trainingruntimes")
        ),
        (c.GROUP, "clustertrainingruntimes"): Direct(
            lambda event: manager.on_runtime(event, cluster=True), listed("clustertrainingruntimes")
        ),
    }
    for kind in manager.watched:
        handlers[(kind.api_version.rpartition("/")[0], kind.plural)] = Direct(
            functools.partial(manager.on_child, kind), listed(kind.plural)
        )
    return handlers


def deliver(sink: Sink, event: dict[str, Any], resource: Any) -> None:
    """One event to its handler; a handler that raises loses that event, never the watch (as kopf did)."""
    try:
        sink(event)
    except Exception as err:
        log.error("watch event handler failed", resource=str(resource), exc_info=err, **logs.error_fields(err))


def resilient_watch(original: Callable[..., Any]) -> Callable[..., Any]:
    """kopf's `continuous_watch` (one listing and its watch requests), made to survive what the API server or the
    network does to it: kopf restarts on a 410 Gone ERROR event, but a 410 answered as the HTTP status of the watch
    request, or a 5xx, connection error or timeout that outlasts kopf's own retries, or a stream cut mid-line (kopf
    decodes the rest as a last line), escaped its watcher and ended the whole operator (found by the hostile-network
    scenario, issue 17). Those end this stream quietly instead: kopf's `infinite_watch` lists again and watches on
    (after a pause). Anything else still propagates.

    The objects of a kind with a handler in `DIRECT` go to that handler right here, in stream order, and not on to
    kopf: kopf would start a worker task per object and build its causes, kwargs and loggers for each event, which
    was most of a restart's CPU with 5,000 TrainJobs (docs/performance.md). kopf still lists, watches, logs in and
    retries; only its listing-over bookmark goes on to it."""
    from kopf._cogs.clients import errors as kopf_errors
    from kopf._cogs.clients.watching import Bookmark

    async def watch(*args: Any, **kwargs: Any) -> Any:
        resource = kwargs.get("resource")
        direct = DIRECT.get((getattr(resource, "group", ""), getattr(resource, "plural", "")))
        try:
            async for event in original(*args, **kwargs):
                if direct is not None:
                    if isinstance(event, dict):
                        if event.get("type") != "BOOKMARK":
                            deliver(direct.event, event, resource)
                        continue
                    if event is Bookmark.LISTED:  # every object of the listing went to `direct.event` above
                        direct.listed(kwargs.get("namespace"))
                yield event
        except (
            kopf_errors.APIServerError,
            kopf_errors.APIClientError,
            aiohttp.ClientError,
            TimeoutError,
            json.JSONDecodeError,  # a stream cut mid-line: kopf decodes what is left as a last line
            UnicodeDecodeError,  # the same, cut inside a character
        ) as err:
            status = getattr(err, "status", None) or 0
            if isinstance(err, kopf_errors.APIClientError) and status < 500 and status not in (403, 410, 429):
                raise
            log.warning(
                "watch stream failed; listing again", resource=str(kwargs.get("resource", "")), **logs.error_fields(err)
            )
            await asyncio.sleep(max(WATCH_RESTART_PAUSE, kopf_retry_after(err)))

    return watch


def kopf_retry_after(err: BaseException) -> float:
    """The seconds a kopf API error's `Retry-After` asks for (0 without one)."""
    headers = getattr(err, "headers", None) or {}
    return min(parse_retry_after(headers.get("Retry-After")) or 0.0, RETRY_AFTER_CAP)


def retry_after_on_server_errors(original: Callable[..., Any]) -> Callable[..., Any]:
    """kopf's `check_response`, made to raise a 5xx that carries `Retry-After` as kopf's 429 error class.

    kopf's request loop honours Retry-After only for 429 (`APITooManyRequestsError`) and retries any 5xx after its
    own `error_backoffs` (1 s first); client-go waits as asked for any 5xx too (`checkWait` in rest/request.go). The
    full-size hostile network caught kopf listing again 1 s after a 503 that asked for 2-3 s (issue 17). The status
    stays the server's, so `resilient_watch` still treats it as the server's failure."""
    from kopf._cogs.clients import errors as kopf_errors

    async def check_response(response: Any) -> None:
        try:
            await original(response)
        except kopf_errors.APIServerError as err:
            if not kopf_retry_after(err):
                raise
            payload = getattr(err, "_payload", None)  # kopf keeps the Status as it was answered
            raise kopf_errors.APITooManyRequestsError(payload, status=err.status, headers=err.headers) from err

    return check_response


def harden_kopf_watches() -> None:
    """Install `resilient_watch` and `retry_after_on_server_errors` into kopf (once)."""
    from kopf._cogs.clients import errors, watching

    if not getattr(watching.continuous_watch, "resilient", False):
        hardened = resilient_watch(watching.continuous_watch)
        hardened.resilient = True  # type: ignore[attr-defined]
        watching.continuous_watch = hardened
    if not getattr(errors.check_response, "retry_after_on_5xx", False):
        checked = retry_after_on_server_errors(errors.check_response)
        checked.retry_after_on_5xx = True  # type: ignore[attr-defined]
        errors.check_response = checked


def registry_for(manager: Manager, streaming_lists: bool = False) -> kopf.OperatorRegistry:
    """kopf handlers: a few lines each, only feeding the manager. No progress/diff storage is used. With
    `streaming_lists` (the start-up probe found the API server streams a watch's initial events) the watches start
    from the API server's watch cache, as client-go's informers do, instead of paged LISTs."""
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # we record our own events, once per distinct failure
        settings.watching.server_timeout = 600
        settings.watching.client_timeout = 660
        settings.networking.request_timeout = 30
        settings.networking.enforce_retry_after = True  # kopf's own requests (lists, watches) honour Retry-After
        settings.scanning.disabled = True
        settings.watching.chunk_size = LIST_CHUNK
        settings.watching.initial_streaming = streaming_lists
        settings.persistence.diffbase_storage = NoDiffBase()

    logins = 0

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        # kopf logs in again when the credentials expire or the API server answers 401: resolve them again then.
        nonlocal logins
        connection = manager.client.connection
        if logins and connection.token_file is None:
            connection = await manager.client.refresh(min_age=5.0)
        logins += 1
        scheme, token = connection.scheme_and_token()
        return kopf.ConnectionInfo(
            server=connection.server,
            ca_path=connection.ca_path,
            ca_data=connection.ca_pem,
            insecure=connection.insecure or None,
            scheme=scheme,
            token=token,
            certificate_data=connection.cert_pem,
            private_key_data=connection.key_pem,
            default_namespace=connection.default_namespace,
            proxy_url=connection.proxy_url,
            trust_env=not connection.proxy_url,
            expiration=connection.expiry,
        )

    @kopf.on.event(c.GROUP, c.VERSION, "trainjobs", registry=registry)
    async def trainjob_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_trainjob(dict(event))

    for kind in manager.watched:  # the child kinds the plugins declare watched (the JobSets)
        group, _, version = kind.api_version.rpartition("/")
        kopf.on.event(group, version, kind.plural, registry=registry, id=f"{kind.plural}.{group}")(
            child_handler(manager, kind)
        )

    @kopf.on.event(c.GROUP, c.VERSION, "trainingruntimes", registry=registry)
    async def runtime_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_runtime(dict(event), cluster=False)

    @kopf.on.event(c.GROUP, c.VERSION, "clustertrainingruntimes", registry=registry)
    async def cluster_runtime_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_runtime(dict(event), cluster=True)

    return registry


def child_handler(manager: Manager, kind: ChildKind) -> Callable[..., Any]:
    async def child_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_child(kind, dict(event))

    return child_event


def loop_error(_: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Errors asyncio itself reports (an async generator of a watch failing to close at shutdown, a callback that
    raised): one line with the error's type and text, not a traceback."""
    err = context.get("exception")
    fields = logs.error_fields(err) if isinstance(err, BaseException) else {}
    log.error("event loop error", message=str(context.get("message", ""))[:300], **fields)


def supervise(manager: Manager, name: str, task: "asyncio.Task[Any]", stop: asyncio.Event) -> None:
    """A background task that ends (crashed, or returned) fails /healthz and stops the operator (exit 1)."""

    def done(finished: "asyncio.Task[Any]") -> None:
        if stop.is_set():  # shutting down: tasks are cancelled on purpose
            return
        err = None if finished.cancelled() else finished.exception()
        manager.dead.append(name)
        fields = (
            logs.error_fields(err)
            if err is not None
            else {"error": "cancelled" if finished.cancelled() else "returned"}
        )
        log.error("background task ended; stopping the operator", task=name, exc_info=err, **fields)
        stop.set()

    task.add_done_callback(done)


async def serve(cfg: OperatorConfig, kubeconfig: str | None, context: str | None = None) -> int:
    """Run until stopped; 0 on a clean stop, 1 when a background task died. Raises StartupError."""
    gc.freeze()  # the modules' objects live as long as the process: the collector stops walking them
    asyncio.get_running_loop().set_exception_handler(loop_error)
    connection = k8s_config.load(kubeconfig, context)  # nothing else runs yet: blocking for the helper is fine
    if connection.tls_server_name:
        log.warning(
            "kopf's watches ignore tls-server-name and check the certificate against the server URL's host",
            tls_server_name=connection.tls_server_name,
            server=connection.server,
        )
    metrics = Metrics()
    async with Client(connection, cfg.client.qps, cfg.client.burst, on_request=metrics.record_request) as client:
        manager = Manager(cfg, client, metrics)
        tasks: dict[str, asyncio.Task[Any]] = {}
        stop = manager.stop
        health = HealthServer(cfg.health.host, cfg.health.port, manager.metrics, manager.readiness, manager.liveness)
        try:
            await health.start()
        except OSError as err:
            raise StartupError(
                f"cannot serve /healthz and /readyz on {cfg.health.host}:{cfg.health.port}: "
                f"{err.strerror or err}; pass another --health-port"
            ) from err
        try:
            facts = await preflight(client, plan_of(cfg))
        except BaseException:
            await health.stop()
            raise
        manager.preflight_done = True
        admission: AdmissionServer | None = None
        status: StatusServer | None = None
        if cfg.webhook.enabled:
            webhooks = Webhooks(manager.framework, manager.runtimes, manager.store, client, utcnow)
            admission = AdmissionServer(cfg.webhook.host, cfg.webhook.port, webhooks.handlers(), manager.metrics)
        if cfg.status_server.enabled:
            # Its own client: progress reports never eat the reconciler's request budget (upstream does the same).
            status_client = Client(connection, cfg.client.qps, cfg.client.burst, on_request=metrics.record_request)
            status = StatusServer(cfg.status_server, status_client, manager.store, manager.metrics)
        if admission is not None or status is not None:

            def fatal(line: str) -> None:
                manager.fatal = line
                manager.stop.set()

            endpoint = manager.status_endpoint()
            hosts = [urlsplit(endpoint.base_url).hostname or ""] if endpoint and not cfg.webhook.service_name else []
            tasks["webhook certificates"] = asyncio.create_task(
                keep_webhooks_current(
                    client,
                    admission,
                    cfg.webhook,
                    cfg.operator_namespace,
                    utcnow,
                    manager.webhooks_ready,
                    interval=cfg.webhook.cert_check_seconds,
                    also=[status] if status is not None else [],
                    extra_hosts=hosts,
                    on_bundle=manager.on_bundle,
                    fatal=fatal,
                )
            )
        if cfg.leader_election.enabled:
            le = cfg.leader_election
            manager.elector = LeaderElector(
                client,
                cfg.operator_namespace,
                le.lease_name,
                le.lease_duration_seconds,
                le.renew_deadline_seconds,
                le.retry_period_seconds,
                on_change=manager.on_leadership,
            )
            tasks["leader election"] = asyncio.create_task(manager.elector.run())
        else:
            manager.metrics.leader.set(1)
        tasks["work queue"] = asyncio.create_task(
            manager.queue.run(manager.work, cfg.concurrency, manager.may_reconcile)
        )
        tasks["state gauge"] = asyncio.create_task(manager.count_states())
        ready_flag: asyncio.Event = asyncio.Event()

        async def mark_ready() -> None:
            await ready_flag.wait()
            manager.kopf_ready.set()

        tasks["readiness"] = asyncio.create_task(mark_ready())
        for name, task in tasks.items():
            if name != "readiness":  # the task that ends by design
                supervise(manager, name, task, stop)
        log.info(
            "operator starting",
            namespaces=cfg.namespaces or "all",
            webhooks=cfg.webhook.enabled,
            status_server=cfg.status_server.enabled,
            leader_election=cfg.leader_election.enabled,
            qps=cfg.client.qps,
            burst=cfg.client.burst,
        )
        try:
            harden_kopf_watches()
            DIRECT.clear()
            DIRECT.update(direct_sinks(manager))
            await until_stopped(
                kopf.operator(
                    registry=registry_for(manager, streaming_lists=facts.streams_initial_events),
                    clusterwide=not cfg.namespaces,
                    namespaces=cfg.namespaces,
                    standalone=True,
                    ready_flag=ready_flag,
                    stop_flag=stop,
                ),
                lambda: manager.fatal,
            )
        finally:
            DIRECT.clear()
            stop.set()
            for task in tasks.values():
                task.cancel()
            for task in tasks.values():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if manager.elector is not None:
                await manager.elector.release()
            if admission is not None:
                await admission.stop()
            if status is not None:
                await status.stop()
                await status.client.close()
            await health.stop()
            if manager.fatal is not None:
                await remove_webhook_configurations(client, cfg)
        if manager.fatal is not None:
            raise StartupError(manager.fatal)
        return 1 if manager.dead else 0


async def until_stopped(operator: Awaitable[None], fatal: Callable[[], str | None]) -> None:
    """kopf's run. An error it raises on its way out once we stopped it for a fatal start-up problem (`fatal()` says
    which) is logged, not raised: the one line naming the problem is what the admin must read. Seen under load
    (about 1 start in 20 with both cores busy): kopf's API discovery (`scanning._read_version`) was mid-request when
    kopf closed its aiohttp session, aiohttp's `_connect_and_send_request` asserted `self._connector is not None`,
    and kopf re-raised that bare AssertionError from the task it had cut short."""
    try:
        await operator
    except Exception as err:
        if fatal() is None:
            raise
        log.warning("kopf stopped with an error after a fatal start-up problem", error=describe(err))


async def remove_webhook_configurations(client: Client, cfg: OperatorConfig) -> None:
    """Configurations the API server cannot call refuse every TrainJob write (failurePolicy Fail): take them away."""
    for kind, name in (
        ("ValidatingWebhookConfiguration", cfg.webhook.validating_name),
        ("MutatingWebhookConfiguration", cfg.webhook.mutating_name),
    ):
        try:
            await client.delete("admissionregistration.k8s.io/v1", kind, name)
        except (ApiError, OSError) as err:
            log.warning("cannot remove the webhook configuration", kind=kind, name=name, error=str(err))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainjob-operator run", description="run the TrainJob operator")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use (default: its current-context)")
    p.add_argument("--namespace", action="append", default=None, help="namespace to watch; repeatable")
    p.add_argument("--config", help="operator config file (YAML)")
    p.add_argument("--log-format", choices=("json", "console"))
    p.add_argument("--log-level")
    p.add_argument("--health-port", type=int)
    p.add_argument("--webhook-port", type=int)
    p.add_argument("--no-webhooks", action="store_true", help="do not serve admission webhooks")
    p.add_argument("--status-port", type=int, help="port of the TrainJob status server (progress from pods)")
    p.add_argument(
        "--no-status-server",
        action="store_true",
        help="do not serve progress updates from trainer pods (nothing is injected into them)",
    )
    p.add_argument("--no-leader-election", action="store_true")
    p.add_argument("--qps", type=float)
    p.add_argument("--burst", type=int)
    p.add_argument(
        "--streaming-lists",
        choices=("auto", "off"),
        help="auto: watches start from the API server's watch cache when it streams initial events; off: paged LISTs",
    )
    p.add_argument("--concurrency", type=int)
    p.add_argument("--operator-namespace", default=os.environ.get("POD_NAMESPACE"))
    return p


def settings_from(args: argparse.Namespace) -> OperatorConfig:
    cfg = config_module.load(args.config)
    if args.namespace:
        cfg.namespaces = args.namespace
    if args.log_format:
        cfg.log_format = args.log_format
    if args.log_level:
        cfg.log_level = args.log_level
    if args.health_port is not None:
        cfg.health.port = args.health_port
    if args.webhook_port is not None:
        cfg.webhook.port = args.webhook_port
    if args.no_webhooks:
        cfg.webhook.enabled = False
    if args.status_port is not None:
        cfg.status_server.port = args.status_port
    if args.no_status_server:
        cfg.status_server.enabled = False
    if args.no_leader_election:
        cfg.leader_election.enabled = False
    if args.qps is not None:
        cfg.client.qps = args.qps
    if args.burst is not None:
        cfg.client.burst = args.burst
    if args.streaming_lists:
        cfg.client.streaming_lists = args.streaming_lists
    if args.concurrency is not None:
        cfg.concurrency = args.concurrency
    if args.operator_namespace:
        cfg.operator_namespace = args.operator_namespace
    return OperatorConfig.model_validate(cfg.model_dump())


def run(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        cfg = settings_from(args)
    except config_module.ConfigFileError as err:
        return _exit(str(err), 2)
    logs.configure(cfg.log_format, cfg.log_level)
    try:
        return asyncio.run(serve(cfg, args.kubeconfig, args.context))
    except k8s_config.ConfigError as err:
        return _exit(str(err), 2)
    except StartupError as err:
        return _exit(str(err), 3)
    except KeyboardInterrupt:
        return 0


def _exit(line: str, code: int) -> int:
    """The one line that says why the operator cannot start (exit 2: flags, config or kubeconfig; 3: the cluster)."""
    print(f"trainjob-operator: error: {line}", file=sys.stderr, flush=True)
    return code


__all__ = ["Manager", "registry_for", "run", "serve"]
