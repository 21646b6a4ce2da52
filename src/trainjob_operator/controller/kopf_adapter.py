"""kopf as the operator uses it: its watches feed the manager's caches, and nothing else.

`run` is the whole of it: kopf's settings, its login, and one event handler per watch the manager declares
(`Manager.watches()`), registered with kopf and routed to by the seam (`registry_and_routes`: both from one loop), and
kopf's private seams installed and checked (`kopf_seams`). No kopf progress or diff-base storage is used, so the
framework writes nothing to our objects. This module and `kopf_seams` are the only ones that import kopf; the
manager is reached through `Watched`, so nothing here imports it.
"""

import asyncio
import functools
import signal
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from .. import logs
from ..k8s.client import KubeClient
from ..runtime.errors import describe
from . import kopf_seams
from ._kopf import kopf
from .watches import Watch

log = logs.get("trainjob_operator.manager")

LIST_CHUNK = 500
"""Objects per page of a watch's initial listing: one page's bodies in memory at a time, not 5,000 (the peak RSS
of a restart)."""


class Watched(Protocol):
    """What kopf's run takes of the manager (`manager.Manager`)."""

    client: KubeClient
    fatal: str | None
    """Why the operator stops after starting (then kopf's own error on its way out is logged, not raised)."""

    def watches(self) -> Sequence[Watch]: ...

    def on_listed(self, plural: str, namespace: str | None) -> None: ...


class NoDiffBase(kopf.DiffBaseStorage):
    """We only use event handlers: no change detection, so no essence is built (kopf deep-copies every body for it)
    and nothing is ever written to our objects."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@dataclass(frozen=True, slots=True)
class WatchHandler:
    """One watch's kopf event handler. The seam calls it with every event of the watch's stream, in stream order
    and in the event loop (`kopf_seams.resilient_watch`: kopf's per-object workers are skipped); it is the route,
    so no handler is registered that does not run."""

    on_event: Callable[[dict[str, Any]], None]

    def __call__(self, event: "dict[str, Any] | kopf.RawEvent", **_: Any) -> None:
        self.on_event(cast(dict[str, Any], event))  # a dict either way: kopf's RawEvent is a TypedDict


def configure(settings: kopf.OperatorSettings, streaming_lists: bool, watches: Sequence[Watch] = ()) -> None:
    """kopf's settings for this operator (also what the contract tests run kopf's watch loop with)."""
    settings.posting.enabled = False  # we record our own events, once per distinct failure
    settings.watching.server_timeout = 600
    settings.watching.client_timeout = 660
    settings.networking.request_timeout = 30
    settings.networking.enforce_retry_after = True  # kopf's own requests (lists, watches) honour Retry-After
    settings.scanning.disabled = True
    settings.watching.chunk_size = LIST_CHUNK
    settings.watching.initial_streaming = streaming_lists
    settings.persistence.diffbase_storage = NoDiffBase()
    for watch in watches:
        if watch.selector is not None:
            settings.watching.label_selectors[functools.partial(same_resource, watch)] = watch.selector


def same_resource(watch: Watch, resource: Any) -> bool:
    """kopf's resource (`kopf.Resource`) is the one `watch` lists."""
    return bool(resource.group == watch.group and resource.plural == watch.plural)


def registry_and_routes(
    manager: Watched, streaming_lists: bool = False
) -> tuple[kopf.OperatorRegistry, kopf_seams.Routes]:
    """kopf's registry (its settings, the login, one event handler per watch) and the routes by (API group, plural)
    that send each watch's events to that same handler, and its listing-over marker to `manager.on_listed`. With
    `streaming_lists` (the start-up probe found the API server streams a watch's initial events) the watches start
    from the API server's watch cache, as client-go's informers do, instead of paged LISTs."""
    registry = kopf.OperatorRegistry()
    watches = manager.watches()

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure(settings, streaming_lists, watches)

    logins = 0

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.AiohttpSession:
        """kopf's requests go through the operator's client (`Client.as_session`): its credentials at each request
        (renewed before they expire, as the client's own), `tls-server-name`, proxy, rate limiters and request
        metrics. No `expiration` is given: kopf would close the session then, cutting every watch. kopf logs in again
        when the API server answers 401: the credentials are resolved again then."""
        nonlocal logins
        connection = manager.client.connection
        if logins and connection.token_file is None:
            connection = await manager.client.refresh(min_age=5.0)
        logins += 1
        return kopf.AiohttpSession(
            aiohttp_session=manager.client.as_session(),
            server=connection.server,
            default_namespace=connection.default_namespace,
        )

    routes: dict[tuple[str, str], kopf_seams.Route] = {}
    for watch in watches:
        handler = WatchHandler(watch.on_event)
        kopf.on.event(watch.group, watch.version, watch.plural, registry=registry, id=f"{watch.plural}.{watch.group}")(
            handler
        )
        routes[(watch.group, watch.plural)] = kopf_seams.Route(
            handler, functools.partial(manager.on_listed, watch.plural)
        )
    return registry, kopf_seams.Routes(routes)


async def run(
    manager: Watched,
    *,
    streaming_lists: bool,
    namespaces: list[str],
    ready: asyncio.Event,
    stop: asyncio.Event,
) -> None:
    """kopf's watches, until `stop`. kopf sets `ready` once its watches are started."""
    kopf_seams.install()
    registry, routes = registry_and_routes(manager, streaming_lists)
    with kopf_seams.routed(routes):
        await until_stopped(
            _operator(
                registry=registry,
                clusterwide=not namespaces,
                namespaces=namespaces,
                standalone=True,
                ready_flag=ready,
                stop_flag=stop,
            ),
            lambda: manager.fatal,
        )


async def _operator(*, stop_flag: asyncio.Event, **options: Any) -> None:
    """`kopf.operator` (spawn its tasks, run them until stopped), except that its stop leaves the tasks it did not
    create to their owners: the servers' connections keep answering while the operator stops (kopf_seams.py)."""
    tasks = await kopf.spawn_tasks(stop_flag=stop_flag, **options)
    stop_on_signals(stop_flag)
    await kopf.run_tasks(tasks, ignored=kopf_seams.ForeignTasks())


EXIT_DEADLINE_S = 120.0
"""How long a stop asked by a signal may take before the process kills itself: kopf's own last resort (its
`ultimate_exiting_timeout`, armed by its signal handler, which `stop_on_signals` replaces), bounded by what a graceful
stop does: the webhook server's drain (at most 60 s, `Webhook.drain_seconds`), kopf's tasks, the lease release."""


def stop_on_signals(stop: asyncio.Event, deadline: float = EXIT_DEADLINE_S) -> None:
    """SIGTERM and SIGINT set the operator's stop flag, replacing the handlers `kopf.spawn_tasks` just installed.
    kopf then stops by its stop flag, whose waiter task ends; stopped by a signal, kopf left that waiter pending and
    waited 5 s for it before anything else could stop (the webhook server's drain among them). kopf's handler also
    armed a SIGKILL for a stop that hangs, which a stop by flag does not: armed here instead, after `deadline`
    seconds, and at once on a second signal (a second Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        return  # kopf ignores signals there too; whoever runs the loop stops it
    loop = asyncio.get_running_loop()

    def kill(why: str) -> None:
        log.error("stopping took too long; killing the process", why=why)
        signal.pthread_kill(threading.get_ident(), signal.SIGKILL)

    signalled: list[signal.Signals] = []

    def received(sig: signal.Signals) -> None:
        if signalled:  # not `stop.is_set()`: a stop begun otherwise (leadership lost) still drains on a SIGTERM
            kill(f"{sig.name} after {signalled[0].name}")
            return
        signalled.append(sig)
        log.info("stopping", signal=sig.name, deadline_seconds=deadline)
        stop.set()
        loop.call_later(deadline, kill, f"not stopped {deadline:g} s after {sig.name}")

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, received, sig)


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


__all__ = [
    "EXIT_DEADLINE_S",
    "LIST_CHUNK",
    "NoDiffBase",
    "WatchHandler",
    "Watched",
    "configure",
    "registry_and_routes",
    "run",
    "until_stopped",
]
