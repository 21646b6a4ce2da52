"""The runnables of one operator (`runnable.py`), in start order: `main.serve` runs them around kopf's watches and
stops them in reverse order. A new part of the operator is one more entry in `of`."""

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .. import logs
from ..k8s.client import BUILTIN, Client, Resource, RESTMapper
from ..k8s.connection import Connection
from ..runtime.pipeline import Framework
from ..runtime.plugins import workload
from .admissionserver import AdmissionServer, keep_webhooks_current
from .healthserver import HealthServer
from .leader import LeaderElector
from .manager import Manager, remove_webhook_configurations, supervise
from .metricsserver import MetricsServer
from .preflight import StartupError, preflight, served
from .reconciler import utcnow
from .runnable import Loop, Runnable, Step
from .settings import plan_of
from .statusserver import StatusServer
from .webhooks import Webhooks

log = logs.get("trainjob_operator.manager")


def rest_mapper(framework: Framework) -> RESTMapper:
    """The built-in kinds and every child kind the plugins declare (a plugin with a new kind changes nothing here)."""
    return BUILTIN.with_kinds((k.kind, Resource(k.api_version, k.plural)) for k in framework.kinds())


def of(manager: Manager, connection: Connection, watches_started: asyncio.Event) -> list[Runnable]:
    """Every runnable of `manager`, in start order (so stopped bottom-up: the loops, then the Lease, the servers,
    /healthz, and last the webhook configurations a fatal start-up problem leaves unusable)."""
    cfg = manager.cfg
    watch: Callable[[str, asyncio.Task[object]], None] = functools.partial(supervise, manager, stop=manager.stop)
    runnables: list[Runnable] = [
        Step("webhook configurations", on_stop=functools.partial(remove_if_fatal, manager)),
        health_server(manager),
        Step("preflight", on_start=functools.partial(run_preflight, manager)),
    ]
    servers = Servers()
    if cfg.status_server.enabled:
        runnables.append(
            Step("status server", functools.partial(servers.make_status, manager, connection), servers.stop_status)
        )
    if cfg.webhook.enabled:
        runnables.append(
            Step("admission webhooks", functools.partial(servers.make_admission, manager), servers.stop_admission)
        )
    if cfg.metrics.auth.enabled:
        runnables.append(Step("metrics server", functools.partial(servers.make_metrics, manager), servers.stop_metrics))
    if cfg.status_server.enabled or cfg.webhook.enabled or cfg.metrics.auth.enabled:
        certificates = functools.partial(keep_certificates, manager, servers)
        runnables.append(Loop("webhook certificates", certificates, watch))
    runnables += [
        leadership(manager, watch),
        Loop(
            "work queue",
            functools.partial(manager.queue.run, manager.work, cfg.concurrency, manager.may_reconcile),
            watch,
        ),
        Loop("state gauge", manager.gauge.run, watch),
        Loop("readiness", functools.partial(mark_ready, manager, watches_started)),  # ends by design: unsupervised
    ]
    return runnables


@dataclass
class Servers:
    """The TLS servers, made once the preflight passed; the certificate loop starts them when it has a certificate
    and the steps stop them."""

    admission: AdmissionServer | None = None
    status: StatusServer | None = None
    metrics: MetricsServer | None = None

    async def make_metrics(self, manager: Manager) -> None:
        self.metrics = MetricsServer(manager.cfg.metrics, manager.client, manager.metrics)

    async def stop_metrics(self) -> None:
        if self.metrics is not None:
            await self.metrics.stop()

    async def make_status(self, manager: Manager, connection: Connection) -> None:
        cfg = manager.cfg
        # Its own client: progress reports never eat the reconciler's request budget (upstream does the same).
        client = Client(
            connection,
            cfg.client.qps,
            cfg.client.burst,
            on_request=manager.metrics.record_request,
            mapper=manager.client.mapper,
        )
        self.status = StatusServer(cfg.status_server, client, manager.store, manager.metrics)

    async def stop_status(self) -> None:
        if self.status is not None:
            await self.status.stop()
            await self.status.client.close()

    async def make_admission(self, manager: Manager) -> None:
        cfg = manager.cfg.webhook
        webhooks = Webhooks(manager.framework, manager.runtimes, manager.store, manager.client, utcnow)
        # Only behind a Service do calls outlive the stop (an endpoint leaves it late); a URL is this process's own.
        drain = cfg.drain_seconds if cfg.service_name else 0.0
        self.admission = AdmissionServer(cfg.host, cfg.port, webhooks.handlers(), manager.metrics, drain)

    async def stop_admission(self) -> None:
        if self.admission is not None:
            await self.admission.stop()


def health_server(manager: Manager) -> Runnable:
    cfg = manager.cfg.health
    server = HealthServer(
        cfg.host,
        cfg.port,
        manager.metrics,
        manager.readiness,
        manager.liveness,
        serve_metrics=not manager.cfg.metrics.auth.enabled,
    )

    async def start() -> None:
        try:
            await server.start()
        except OSError as err:
            raise StartupError(
                f"cannot serve /healthz and /readyz on {cfg.host}:{cfg.port}: {err.strerror or err}; "
                "pass another --health-port"
            ) from err

    return Step("health server", on_start=start, on_stop=server.stop)


async def run_preflight(manager: Manager) -> None:
    manager.after_preflight(await preflight(manager.client, plan_of(manager.cfg)))
    await workload_api(manager)


async def workload_api(manager: Manager) -> None:
    """With the Workload API's gate on, before the webhooks serve: whether the API server serves that API. Said once
    when it does not; the plugin then refuses TrainJobs of runtimes with spec.scheduling, naming the missing API."""
    if not manager.cfg.feature_gates.get(workload.GATE):
        return
    missing = workload.api_missing((await served(manager.client, [workload.API_VERSION]))[workload.API_VERSION])
    if missing:
        log.warning(missing)
        for plugin in manager.framework.plugins:
            if isinstance(plugin, workload.WorkloadScheduling):
                plugin.api_served = False


async def keep_certificates(manager: Manager, servers: Servers) -> None:
    """The webhook certificate (and the status server's, which shares it), renewed and published."""
    cfg = manager.cfg

    def fatal(line: str) -> None:
        manager.fatal = line
        manager.stop.set()

    endpoint = manager.status_endpoint()
    hosts = [urlsplit(endpoint.base_url).hostname or ""] if endpoint and not cfg.webhook.service_name else []
    await keep_webhooks_current(
        manager.client,
        servers.admission,
        cfg.webhook,
        cfg.operator_namespace,
        utcnow,
        manager.webhooks_ready,
        interval=cfg.webhook.cert_check_seconds,
        also=[s for s in (servers.status, servers.metrics) if s is not None],
        extra_hosts=hosts,
        on_bundle=manager.on_bundle,
        fatal=fatal,
    )


def leadership(manager: Manager, watch: Callable[[str, "asyncio.Task[object]"], None]) -> Runnable:
    """The Lease when leader election is on, from the end of the preflight on (released at stop, so another replica
    takes over at once); otherwise this replica leads from the start."""
    le = manager.cfg.leader_election
    if not le.enabled:

        async def lead() -> None:
            manager.metrics.leader.set(1)

        return Step("leader election", on_start=lead)
    election: list[Loop] = []  # the loop, once started

    async def start() -> None:
        elector = manager.elector = LeaderElector(
            manager.client,
            manager.cfg.operator_namespace,
            le.lease_name,
            le.lease_duration_seconds,
            le.renew_deadline_seconds,
            le.retry_period_seconds,
            on_change=manager.on_leadership,
        )
        election.append(Loop("leader election", elector.run, watch, then=elector.release))
        await election[0].start()

    async def stop() -> None:
        await election[0].stop()

    return Step("leader election", on_start=start, on_stop=stop)


async def mark_ready(manager: Manager, watches_started: asyncio.Event) -> None:
    await watches_started.wait()
    manager.kopf_ready.set()


async def remove_if_fatal(manager: Manager) -> None:
    if manager.fatal is not None:
        await remove_webhook_configurations(manager.client, manager.cfg)


__all__ = ["of", "rest_mapper"]
