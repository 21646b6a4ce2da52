"""The controller manager: the caches kopf's watches feed, the work queue and its reconciler, leadership, and what
/healthz and /readyz say. It holds the state of one running operator; `main.serve` starts and stops its parts."""

import asyncio
import functools
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .. import logs
from ..api import constants as c
from ..certs import Bundle
from ..config import OperatorConfig
from ..k8s.client import ApiError, KubeClient, is_transient, retry_after
from ..metrics import Metrics
from ..runtime import startup
from ..runtime.framework import ChildKind
from ..runtime.identity import same_incarnation
from ..runtime.observed import StatusEndpoint
from ..runtime.pipeline import Framework
from .leader import LeaderElector
from .queue import WorkQueue
from .reconciler import NotLeading, Reconciler
from .runtimes import RuntimeResolver
from .stategauge import StateGauge
from .statusserver import base_url
from .store import Key, PodCache, Store, key_of
from .watches import POD_PLURAL, POD_SELECTOR, Watch

log = logs.get("trainjob_operator.manager")


@dataclass
class Manager:
    cfg: OperatorConfig
    client: KubeClient
    metrics: Metrics = field(default_factory=Metrics)
    store: Store = field(default_factory=Store)
    framework: Framework = field(default_factory=Framework.from_registry)
    queue: WorkQueue[Key] = field(default_factory=WorkQueue)
    elector: LeaderElector | None = None
    webhooks_ready: asyncio.Event = field(default_factory=asyncio.Event)
    kopf_ready: asyncio.Event = field(default_factory=asyncio.Event)
    status_ca: str | None = None
    """The CA of the status server's certificate once settled (what trainer pods trust)."""
    preflight_done: bool = False
    facts: startup.Facts | None = None
    """What the start-up checks found (None: not yet)."""
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
    pod_passes: OrderedDict[Key, float] = field(default_factory=OrderedDict)
    """Per TrainJob: when a pod event last queued it at once (`queue_for_pods`), the oldest first."""
    listings_replace: bool = False
    """A listing is whole when it ends (paged LISTs: kopf lists again from the start after any failure), so what it
    lacks was deleted. Not with streamed listings: kopf resumes a stream cut during its initial events from the last
    object's resourceVersion and still ends it as a listing, so objects that exist may be missing from it."""

    def __post_init__(self) -> None:
        self.gauge = StateGauge(self.metrics)
        self.watched = self.framework.watched()
        self.runtimes = RuntimeResolver(self.client, self.store, self.framework.runtime_models())
        self.reconciler = Reconciler(
            self.client,
            self.store,
            self.framework,
            self.metrics,
            status_server=self.status_endpoint,
            may_write=self.leading,
            runtimes=self.runtimes,
        )
        self.sync.resources = tuple(cache_name(plural, ns) for plural, ns in self.collections())

    @property
    def state_counts(self) -> dict[str, int]:
        return self.gauge.counts

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

    # --- the watches and their events ---------------------------------------------------------------

    def watches(self) -> tuple[Watch, ...]:
        """Every watch of this run, said once: the TrainJobs, the child kinds the plugins declare watched
        (`OwnsKinds.kinds()`), the runtimes and, once the preflight found that RBAC allows it, the JobSets' pods.
        kopf's registry and its routes (`kopf_adapter`), the caches' sync marker and the listings follow from it."""
        store, pods, partial = self.store, self.store.pods, functools.partial
        children = (
            Watch(k.api_version, k.plural, True, store.children[(k.api_version, k.kind)], partial(self.on_child, k))
            for k in self.watched
        )
        return (
            Watch(c.API_VERSION, "trainjobs", True, store.trainjobs, self.on_trainjob),
            *children,
            Watch(c.API_VERSION, "trainingruntimes", True, store.runtimes, partial(self.on_runtime, cluster=False)),
            Watch(
                c.API_VERSION,
                "clustertrainingruntimes",
                False,
                store.cluster_runtimes,
                partial(self.on_runtime, cluster=True),
            ),
            *((Watch("v1", POD_PLURAL, True, pods, self.on_pod, POD_SELECTOR),) if pods is not None else ()),
        )

    def collections(self) -> list[tuple[str, str | None]]:
        """(plural, namespace or None for cluster-wide) of every watch kopf runs."""
        return [(w.plural, ns) for w in self.watches() for ns in w.scopes(self.cfg.namespaces)]

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
        watch = next((w for w in self.watches() if w.plural == plural), None)
        if watch is None or not self.listings_replace:
            return
        for key in watch.cache.snapshot_keys():
            if key not in listed and (namespace is None or key[0] == namespace):
                gone = watch.cache.get(key)
                if gone is not None:
                    watch.on_event({"type": "DELETED", "object": gone})

    def on_trainjob(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        key = key_of(obj)
        self._seen("trainjobs", event, key)
        if event.get("type") == "DELETED":
            self.pod_passes.pop(key, None)
            if self.store.trainjobs.removed(obj):  # this incarnation's: its successor's state stays counted
                self.gauge.drop(key)
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
        self.gauge.track(key, state)
        self.queue.add(key)

    def on_child(self, kind: ChildKind, event: dict[str, Any]) -> None:
        """A watched child kind (JobSets): cached, and its controlling TrainJob queued."""
        obj = event.get("object") or {}
        key = key_of(obj)
        self._seen(kind.plural, event, key)
        cache = self.store.children[(kind.api_version, kind.kind)]
        if event.get("type") == "DELETED":
            cache.removed(obj)
        elif event.get("type") is not None and cache.holds(obj):
            # The answer to this operator's own write, cached by the pass that wrote it, which computed the status
            # from it: its watch event queues nothing (issue 37: a second pass per new TrainJob in a burst).
            return
        else:
            cache.put(obj)
        for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("controller") and owner.get("kind") == c.TRAINJOB_KIND:
                self.queue.add((key[0], owner.get("name", "")))

    def after_preflight(self, facts: startup.Facts) -> None:
        """What the start-up checks found decides how the watches run."""
        self.facts = facts
        self.preflight_done = True
        self.watch_pods(facts)
        self.listings_replace = not facts.streams_initial_events

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
        self.sync.resources = tuple(sorted({cache_name(plural, ns) for plural, ns in self.collections()}))

    def on_pod(self, event: dict[str, Any]) -> None:
        """A JobSet's pod (the watch selects them by label): its summary cached, and its TrainJob queued when what
        the operator reads of it changed."""
        obj = event.get("object") or {}
        key = key_of(obj)
        self._seen(POD_PLURAL, event, key)
        if self.store.pods is None:
            return
        owner = self.store.pods.remove(obj) if event.get("type") == "DELETED" else self.store.pods.put(obj)
        if owner is not None and owner[1]:
            self.queue_for_pods(owner)

    def queue_for_pods(self, key: Key) -> None:
        """A pod event queues its TrainJob at once unless a pod event did so within the last window; then once, at
        the window's end. The window is a second per 1,000 of its pods, at least one: a huge TrainJob's thousands of
        pod events make a pass or two per window, not one each (issue 37: 1,000 pods starting cost the operator 7.9 s
        of CPU, taken from the control plane on the same cores), while one pod's change after a quiet second is
        followed at once."""
        now = time.monotonic()
        last = self.pod_passes.get(key)
        window = max(1.0, (self.store.pods.count(key) if self.store.pods is not None else 0) / 1000)
        if last is not None and now - last < window:
            try:
                self.queue.add_after(key, last + window - now)  # one timer per key: later events join it
                return
            except RuntimeError:  # no running event loop (a synchronous caller): queued at once
                pass
        # Bounded: entries older than any window say nothing. The oldest go first, so each event does O(1) work (a
        # scan of every entry on each event past 4,096 TrainJobs cost 16% of a 5,000-TrainJob restart's CPU).
        while len(self.pod_passes) > 4096 and now - next(iter(self.pod_passes.values())) >= 60:
            self.pod_passes.popitem(last=False)
        self.pod_passes[key] = now
        self.pod_passes.move_to_end(key)
        self.queue.add(key)

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


def cache_name(plural: str, namespace: str | None) -> str:
    return f"{plural} in {namespace}" if namespace and plural != "clustertrainingruntimes" else plural


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


async def remove_webhook_configurations(client: KubeClient, cfg: OperatorConfig) -> None:
    """Configurations the API server cannot call refuse every TrainJob write (failurePolicy Fail): take them away."""
    for kind, name in (
        ("ValidatingWebhookConfiguration", cfg.webhook.validating_name),
        ("MutatingWebhookConfiguration", cfg.webhook.mutating_name),
    ):
        try:
            await client.delete("admissionregistration.k8s.io/v1", kind, name)
        except (ApiError, OSError) as err:
            log.warning("cannot remove the webhook configuration", kind=kind, name=name, error=str(err))


__all__ = [
    "Manager",
    "cache_name",
    "remove_webhook_configurations",
    "supervise",
]
