"""`trainjob-operator run`: the controller manager. kopf watches and feeds the caches; our queue reconciles."""

import argparse
import asyncio
import contextlib
import ctypes
import functools
import gc
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from .. import config as config_module
from .. import flags, logs
from ..api import constants as c
from ..certs import Bundle
from ..config import OperatorConfig
from ..k8s import config as k8s_config
from ..k8s.client import ApiError, Client, is_transient, retry_after
from ..metrics import Metrics
from ..runtime import startup
from ..runtime.errors import printable
from ..runtime.framework import ChildKind
from ..runtime.identity import same_incarnation
from ..runtime.observed import StatusServer as StatusEndpoint
from ..runtime.pipeline import Framework
from . import kopf_adapter, kopf_seams
from .admission import AdmissionServer, keep_webhooks_current
from .health import HealthServer
from .leader import LeaderElector
from .queue import WorkQueue
from .reconciler import NotLeading, Reconciler, utcnow
from .runtimes import RuntimeResolver
from .startup import StartupError, preflight
from .statusserver import StatusServer, base_url
from .store import Key, ObjectCache, PodCache, Store, key_of
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
    listing: dict[str, set[Key]] = field(default_factory=dict)
    """Per watched collection: the keys its current listing delivered so far (`on_listed` drops the others)."""
    listings_replace: bool = False
    """A listing is whole when it ends (paged LISTs: kopf lists again from the start after any failure), so what it
    lacks was deleted. Not with streamed listings: kopf resumes a stream cut during its initial events from the last
    object's resourceVersion and still ends it as a listing, so objects that exist may be missing from it."""

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
        name = cache_name(plural, key[0] if self.cfg.namespaces else None)
        listed = event.get("type") is None
        self.sync.seen(name, listed)
        if listed and self.listings_replace:
            self.listing.setdefault(name, set()).add(key)

    def on_listed(self, plural: str, namespace: str | None) -> None:
        """A watch's listing (in `namespace`, None: cluster-wide) has reached the caches: the first, or one after a
        watch gap (a 410, a failed stream). With paged listings (`listings_replace`), what the listing lacks was
        deleted meanwhile, and kopf sends no DELETED event for it: it goes as if one came (a client-go informer's
        Replace)."""
        name = cache_name(plural, namespace)
        self.sync.complete(name)
        listed = self.listing.pop(name, set())
        cache, deleted = self._cache_of(plural)
        if cache is None or not self.listings_replace:
            return
        for key in cache.snapshot_keys():
            if key not in listed and (namespace is None or key[0] == namespace):
                gone = cache.get(key)
                if gone is not None:
                    deleted({"type": "DELETED", "object": gone})

    def _cache_of(self, plural: str) -> tuple[ObjectCache | PodCache | None, Callable[[dict[str, Any]], None]]:
        """The cache the watch of `plural` feeds, and the handler its events go to."""
        if plural == "trainjobs":
            return self.store.trainjobs, self.on_trainjob
        if plural in ("trainingruntimes", "clustertrainingruntimes"):
            cluster = plural == "clustertrainingruntimes"
            cache = self.store.cluster_runtimes if cluster else self.store.runtimes
            return cache, functools.partial(self.on_runtime, cluster=cluster)
        if plural == kopf_adapter.POD_PLURAL:
            return self.store.pods, self.on_pod
        for kind in self.watched:
            if kind.plural == plural:
                return self.store.children[(kind.api_version, kind.kind)], functools.partial(self.on_child, kind)
        return None, self.on_trainjob

    def on_trainjob(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        key = key_of(obj)
        self._seen("trainjobs", event, key)
        if event.get("type") == "DELETED":
            if self.store.trainjobs.removed(obj):  # this incarnation's: its successor's state stays counted
                self._count_state(self.states.pop(key, None), None)
            self.store.known.forget((obj.get("metadata") or {}).get("uid", ""))
            return
        before = self.store.trainjobs.get(key)
        self.store.trainjobs.put(obj)
        if (
            before is not None
            and not same_incarnation(before, obj)
            and same_incarnation(self.store.trainjobs.get(key), obj)
        ):  # a successor took the name and its predecessor's DELETED never came (a watch gap): that uid is gone
            self.store.known.forget((before.get("metadata") or {}).get("uid", ""))
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

    def watch_pods(self, facts: startup.Facts) -> None:
        """After the preflight: watch the JobSets' pods when RBAC lets the operator list and watch them (the state
        then follows the pods, runtime/health.py); without, the Jobs' counts decide as before, with a warning."""
        if not startup.may_watch_pods(facts):
            log.warning(
                "cannot list and watch pods: STATE follows the Jobs' counts only (no Unschedulable or "
                "CrashLoopBackOff, no pod Warning Events); grant list and watch on pods"
            )
            return
        self.store.pods = PodCache()
        scopes: Sequence[str | None] = self.cfg.namespaces or [None]
        self.sync.resources = tuple(
            sorted({*self.sync.resources, *(cache_name(kopf_adapter.POD_PLURAL, ns) for ns in scopes)})
        )

    def on_pod(self, event: dict[str, Any]) -> None:
        """A JobSet's pod (the watch selects them by label): its summary cached, and its TrainJob queued when what
        the operator reads of it changed."""
        obj = event.get("object") or {}
        key = key_of(obj)
        self._seen(kopf_adapter.POD_PLURAL, event, key)
        if self.store.pods is None:
            return
        owner = self.store.pods.remove(obj) if event.get("type") == "DELETED" else self.store.pods.put(obj)
        if owner is not None and owner[1]:
            self.queue.add(owner)

    def on_runtime(self, event: dict[str, Any], cluster: bool) -> None:
        obj = event.get("object") or {}
        cache = self.store.cluster_runtimes if cluster else self.store.runtimes
        self._seen("clustertrainingruntimes" if cluster else "trainingruntimes", event, key_of(obj))
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


def loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Errors asyncio itself reports (an async generator of a watch failing to close at shutdown, a callback that
    raised): one line with the error's type and text, not a traceback. Silent once the exit line is printed: a task
    kopf cut short on a fatal start-up problem (its API discovery mid-request, issue 27 saw it once in six starts)
    is only collected then, and the exit line must stay the last thing said."""
    if loop.is_closed():  # `serve` has returned (the exit line, if any, comes after it): a task collected now is moot
        return
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
    try:
        kopf_seams.install()
    except kopf_seams.SeamsMissing as err:
        raise StartupError(str(err)) from None
    connection = k8s_config.load(kubeconfig, context)  # nothing else runs yet: blocking for the helper is fine
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
        manager.watch_pods(facts)
        manager.listings_replace = not facts.streams_initial_events
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
            await kopf_adapter.run(
                manager,
                streaming_lists=facts.streams_initial_events,
                namespaces=cfg.namespaces,
                ready=ready_flag,
                stop=stop,
            )
        finally:
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
    p = flags.OneLineParser(prog="trainjob-operator run", description="run the TrainJob operator")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context to use (default: its current-context)")
    p.add_argument(
        "--namespace", action="append", default=None, help="namespace to watch; repeatable (default: all namespaces)"
    )
    p.add_argument("--config", metavar="FILE", help="operator config file (YAML); flags override its values")
    p.add_argument(
        "--log-format",
        choices=("json", "console"),
        help="json: one JSON object per line (default); console: for people (colours only on a terminal)",
    )
    p.add_argument(
        "--log-level",
        type=flags.log_level,
        metavar="LEVEL",
        help=f"one of {', '.join(flags.LOG_LEVELS)} (default: info)",
    )
    p.add_argument("--health-port", type=flags.port, metavar="PORT", help="port of /healthz, /readyz and /metrics")
    p.add_argument("--webhook-port", type=flags.port, metavar="PORT", help="port of the admission webhooks (TLS)")
    p.add_argument("--no-webhooks", action="store_true", help="do not serve admission webhooks")
    p.add_argument(
        "--status-port", type=flags.port, metavar="PORT", help="port of the TrainJob status server (progress from pods)"
    )
    p.add_argument(
        "--no-status-server",
        action="store_true",
        help="do not serve progress updates from trainer pods (nothing is injected into them)",
    )
    p.add_argument(
        "--no-leader-election", action="store_true", help="run without a Lease (only one replica may run then)"
    )
    p.add_argument(
        "--qps", type=float, help="API requests per second the client sends at most, per resource type (0: no limit)"
    )
    p.add_argument("--burst", type=int, help="API requests the client may send at once above --qps (0: no limit)")
    p.add_argument(
        "--streaming-lists",
        choices=("auto", "off"),
        help="auto: watches start from the API server's watch cache when it streams initial events; off: paged LISTs",
    )
    p.add_argument("--concurrency", type=flags.positive_int, metavar="N", help="TrainJobs reconciled at once")
    p.add_argument(
        "--operator-namespace",
        default=os.environ.get("POD_NAMESPACE"),
        metavar="NAMESPACE",
        help="where the operator keeps its Lease, webhook Secret and the kubeflow-trainer-public ConfigMap "
        "(default: $POD_NAMESPACE, else kubeflow-system)",
    )
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
    except ValidationError as err:  # a flag's value the settings refuse
        return _exit(config_module.problems(err), 2)
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
    print(printable(f"trainjob-operator: error: {line}"), file=sys.stderr, flush=True)
    return code


__all__ = ["Manager", "run", "serve"]
