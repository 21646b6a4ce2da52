"""`trainjob-operator run`: the controller manager. kopf watches and feeds the caches; our queue reconciles."""

import argparse
import asyncio
import contextlib
import ctypes
import datetime as dt
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import kopf

from .. import config as config_module
from .. import logs
from ..api import constants as c
from ..certs import Bundle
from ..config import OperatorConfig
from ..k8s import config as k8s_config
from ..k8s.client import Client
from ..metrics import Metrics
from ..runtime.observed import StatusServer as StatusEndpoint
from ..runtime.pipeline import Framework
from .admission import AdmissionServer, keep_webhooks_current
from .health import HealthServer
from .leader import LeaderElector
from .queue import WorkQueue
from .reconciler import Reconciler, utcnow
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
    status_ca: str | None = None
    """The CA of the status server's certificate once settled (what trainer pods trust)."""

    def __post_init__(self) -> None:
        self.reconciler = Reconciler(self.client, self.store, self.framework, self.metrics,
                                     status_server=self.status_endpoint)

    def status_endpoint(self) -> StatusEndpoint | None:
        if not self.cfg.status_server.enabled:
            return None
        webhook = self.cfg.webhook
        return StatusEndpoint(base_url(self.cfg.status_server, webhook.service_name, webhook.url_host,
                                       self.cfg.operator_namespace), self.status_ca)

    def on_bundle(self, bundle: Bundle) -> None:
        self.status_ca = bundle.ca_cert.decode()

    # --- events from kopf's watches -----------------------------------------------------------------

    def on_trainjob(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        key = key_of(obj)
        if event.get("type") == "DELETED":
            self.store.trainjobs.remove(key)
            self.states.pop(key, None)
            self.store.known.forget((obj.get("metadata") or {}).get("uid", ""))
            return
        self.store.trainjobs.put(obj)
        self.states[key] = (obj.get("status") or {}).get("state") or c.STATE_PENDING
        self.queue.add(key)

    def on_jobset(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        key = key_of(obj)
        if event.get("type") == "DELETED":
            self.store.jobsets.remove(key)
        else:
            self.store.jobsets.put(obj)
        for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if owner.get("controller") and owner.get("kind") == c.TRAINJOB_KIND:
                self.queue.add((key[0], owner.get("name", "")))

    def on_runtime(self, event: dict[str, Any], cluster: bool) -> None:
        obj = event.get("object") or {}
        cache = self.store.cluster_runtimes if cluster else self.store.runtimes
        if event.get("type") == "DELETED":
            cache.remove(key_of(obj))
        else:
            cache.put(obj)

    # --- the work loop ------------------------------------------------------------------------------

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader

    def may_reconcile(self) -> bool:
        """The leader reconciles, once the status server's CA is known (trainer pods get it at build time)."""
        return self.leading() and (not self.cfg.status_server.enabled or self.status_ca is not None)

    def on_leadership(self, leader: bool) -> None:
        self.metrics.leader.set(1 if leader else 0)
        if leader:
            for key in self.store.trainjobs.snapshot_keys():
                self.queue.add(key)

    async def work(self, key: Key) -> None:
        try:
            result = await self.reconciler.reconcile(key)
        except Exception:  # never let one TrainJob stop the operator: log, back off, retry
            log.exception("reconcile crashed", namespace=key[0], name=key[1])
            self.queue.add_after(key, self.queue.backoff(key))
            return
        if result.error:
            self.queue.add_after(key, self.queue.backoff(key))
            return
        self.queue.forget(key)
        if result.requeue_after is not None:
            self.queue.add_after(key, result.requeue_after)

    def readiness(self) -> tuple[bool, str]:
        if not self.kopf_ready.is_set():
            return False, "watches are not started"
        if (self.cfg.webhook.enabled or self.cfg.status_server.enabled) and not self.webhooks_ready.is_set():
            return False, "certificates are not ready"
        return True, "ok"

    async def count_states(self, interval: float = 10) -> None:
        """The TrainJobs-by-state gauge; also hands memory freed since the last pass back to the system (the
        initial listing of thousands of objects is parsed at once, and glibc keeps freed heap otherwise)."""
        trim = _malloc_trim()
        passes = 0
        while True:
            counts: dict[str, int] = {}
            for state in list(self.states.values()):
                counts[state] = counts.get(state, 0) + 1
            self.metrics.record_states(counts)
            if passes % 6 == 1:  # trimming walks the heap: once a minute is enough
                trim()
            passes += 1
            await asyncio.sleep(interval)


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


def registry_for(manager: Manager) -> kopf.OperatorRegistry:
    """kopf handlers: a few lines each, only feeding the manager. No progress/diff storage is used."""
    registry = kopf.OperatorRegistry()
    connection = manager.client.connection

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # we record our own events, once per distinct failure
        settings.watching.server_timeout = 600
        settings.watching.client_timeout = 660
        settings.networking.request_timeout = 30
        settings.scanning.disabled = True
        settings.persistence.diffbase_storage = NoDiffBase()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(
            server=connection.server, ca_path=connection.ca_path, insecure=connection.insecure or None,
            scheme="Bearer" if connection.bearer() else None, token=connection.bearer(),
            certificate_path=connection.cert_path, private_key_path=connection.key_path,
            default_namespace=connection.default_namespace)

    @kopf.on.event(c.GROUP, c.VERSION, "trainjobs", registry=registry)
    async def trainjob_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_trainjob(dict(event))

    @kopf.on.event("jobset.x-k8s.io", "v1alpha2", "jobsets", registry=registry)
    async def jobset_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_jobset(dict(event))

    @kopf.on.event(c.GROUP, c.VERSION, "trainingruntimes", registry=registry)
    async def runtime_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_runtime(dict(event), cluster=False)

    @kopf.on.event(c.GROUP, c.VERSION, "clustertrainingruntimes", registry=registry)
    async def cluster_runtime_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_runtime(dict(event), cluster=True)

    return registry


async def serve(cfg: OperatorConfig, kubeconfig: str | None) -> None:
    connection = k8s_config.load(kubeconfig)
    metrics = Metrics()
    async with Client(connection, cfg.client.qps, cfg.client.burst, on_request=metrics.record_request) as client:
        manager = Manager(cfg, client, metrics)
        tasks: list[asyncio.Task[Any]] = []
        health = HealthServer(cfg.health.host, cfg.health.port, manager.metrics, manager.readiness)
        await health.start()
        admission: AdmissionServer | None = None
        status: StatusServer | None = None
        if cfg.webhook.enabled:
            webhooks = Webhooks(manager.framework, manager.reconciler, utcnow)
            admission = AdmissionServer(cfg.webhook.host, cfg.webhook.port, webhooks.handlers(), manager.metrics)
        if cfg.status_server.enabled:
            # Its own client: progress reports never eat the reconciler's request budget (upstream does the same).
            status_client = Client(connection, cfg.client.qps, cfg.client.burst, on_request=metrics.record_request)
            status = StatusServer(cfg.status_server, status_client, manager.store, manager.metrics)
        if admission is not None or status is not None:
            endpoint = manager.status_endpoint()
            hosts = [urlsplit(endpoint.base_url).hostname or ""] if endpoint and not cfg.webhook.service_name else []
            tasks.append(asyncio.create_task(keep_webhooks_current(
                client, admission, cfg.webhook, cfg.operator_namespace, utcnow, manager.webhooks_ready,
                also=[status] if status is not None else [], extra_hosts=hosts, on_bundle=manager.on_bundle)))
        if cfg.leader_election.enabled:
            le = cfg.leader_election
            manager.elector = LeaderElector(client, cfg.operator_namespace, le.lease_name, le.lease_duration_seconds,
                                            le.renew_deadline_seconds, le.retry_period_seconds,
                                            on_change=manager.on_leadership)
            tasks.append(asyncio.create_task(manager.elector.run()))
        else:
            manager.metrics.leader.set(1)
        tasks.append(asyncio.create_task(manager.queue.run(manager.work, cfg.concurrency, manager.may_reconcile)))
        tasks.append(asyncio.create_task(manager.count_states()))
        ready_flag: asyncio.Event = asyncio.Event()

        async def mark_ready() -> None:
            await ready_flag.wait()
            manager.kopf_ready.set()

        tasks.append(asyncio.create_task(mark_ready()))
        log.info("operator starting", namespaces=cfg.namespaces or "all", webhooks=cfg.webhook.enabled,
                 status_server=cfg.status_server.enabled,
                 leader_election=cfg.leader_election.enabled, qps=cfg.client.qps, burst=cfg.client.burst)
        try:
            await kopf.operator(registry=registry_for(manager), clusterwide=not cfg.namespaces,
                                namespaces=cfg.namespaces, standalone=True, ready_flag=ready_flag)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainjob-operator run", description="run the TrainJob operator")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--namespace", action="append", default=None, help="namespace to watch; repeatable")
    p.add_argument("--config", help="operator config file (YAML)")
    p.add_argument("--log-format", choices=("json", "console"))
    p.add_argument("--log-level")
    p.add_argument("--health-port", type=int)
    p.add_argument("--webhook-port", type=int)
    p.add_argument("--no-webhooks", action="store_true", help="do not serve admission webhooks")
    p.add_argument("--status-port", type=int, help="port of the TrainJob status server (progress from pods)")
    p.add_argument("--no-status-server", action="store_true",
                   help="do not serve progress updates from trainer pods (nothing is injected into them)")
    p.add_argument("--no-leader-election", action="store_true")
    p.add_argument("--qps", type=float)
    p.add_argument("--burst", type=int)
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
        print(f"trainjob-operator: error: {err}")
        return 2
    logs.configure(cfg.log_format, cfg.log_level)
    try:
        asyncio.run(serve(cfg, args.kubeconfig))
    except k8s_config.ConfigError as err:
        log.error("cannot connect", error=str(err))
        return 2
    except KeyboardInterrupt:
        pass
    return 0


__all__ = ["Manager", "dt", "registry_for", "run", "serve"]
