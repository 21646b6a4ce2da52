"""kopf as the operator uses it: its watches feed the manager's caches, and nothing else.

`run` is the whole of it: kopf's handlers and settings (`registry_for`), the routes that send watched objects
straight to the manager (`routes_for`), and kopf's private seams installed and checked (`kopf_seams`). No kopf
progress or diff-base storage is used, so the framework writes nothing to our objects.
"""

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .. import logs
from ..api import constants as c
from ..runtime.errors import describe
from ..runtime.framework import ChildKind
from . import kopf_seams
from ._kopf import kopf

if TYPE_CHECKING:
    from .manager import Manager

log = logs.get("trainjob_operator.manager")

POD_PLURAL = "pods"
POD_SELECTOR = c.JOBSET_NAME_LABEL
"""The pods watched: only those a JobSet made (an existence selector, applied by the API server)."""

LIST_CHUNK = 500
"""Objects per page of a watch's initial listing: one page's bodies in memory at a time, not 5,000 (the peak RSS
of a restart)."""


class NoDiffBase(kopf.DiffBaseStorage):
    """We only use event handlers: no change detection, so no essence is built (kopf deep-copies every body for it)
    and nothing is ever written to our objects."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def routes_for(manager: "Manager") -> kopf_seams.Routes:
    """Every watched kind's handlers, by (API group, plural): the manager's caches, and the sync marker once a
    listing has reached them."""

    def listed(plural: str) -> Callable[[str | None], None]:
        return functools.partial(manager.on_listed, plural)

    routes: dict[tuple[str, str], kopf_seams.Route] = {
        (c.GROUP, "trainjobs"): kopf_seams.Route(manager.on_trainjob, listed("trainjobs")),
        (c.GROUP, "trainingruntimes"): kopf_seams.Route(
            lambda event: manager.on_runtime(event, cluster=False), listed("trainingruntimes")
        ),
        (c.GROUP, "clustertrainingruntimes"): kopf_seams.Route(
            lambda event: manager.on_runtime(event, cluster=True), listed("clustertrainingruntimes")
        ),
    }
    for kind in manager.watched:
        routes[(kind.api_version.rpartition("/")[0], kind.plural)] = kopf_seams.Route(
            functools.partial(manager.on_child, kind), listed(kind.plural)
        )
    if manager.store.pods is not None:
        routes[("", POD_PLURAL)] = kopf_seams.Route(manager.on_pod, listed(POD_PLURAL))
    return kopf_seams.Routes(routes)


def configure(settings: kopf.OperatorSettings, streaming_lists: bool) -> None:
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
    settings.watching.label_selectors[lambda r: r.group == "" and r.plural == POD_PLURAL] = POD_SELECTOR


def registry_for(manager: "Manager", streaming_lists: bool = False) -> kopf.OperatorRegistry:
    """kopf handlers: a few lines each, only feeding the manager (they run only for a kind without a route). With
    `streaming_lists` (the start-up probe found the API server streams a watch's initial events) the watches start
    from the API server's watch cache, as client-go's informers do, instead of paged LISTs."""
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure(settings, streaming_lists)

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

    @kopf.on.event(c.GROUP, c.VERSION, "trainjobs", registry=registry)
    async def trainjob_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_trainjob(dict(event))

    for kind in manager.watched:  # the child kinds the plugins declare watched (the JobSets)
        group, _, version = kind.api_version.rpartition("/")
        kopf.on.event(group, version, kind.plural, registry=registry, id=f"{kind.plural}.{group}")(
            child_handler(manager, kind)
        )

    if manager.store.pods is not None:

        @kopf.on.event("", "v1", POD_PLURAL, registry=registry)
        async def pod_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
            manager.on_pod(dict(event))

    @kopf.on.event(c.GROUP, c.VERSION, "trainingruntimes", registry=registry)
    async def runtime_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_runtime(dict(event), cluster=False)

    @kopf.on.event(c.GROUP, c.VERSION, "clustertrainingruntimes", registry=registry)
    async def cluster_runtime_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_runtime(dict(event), cluster=True)

    return registry


def child_handler(manager: "Manager", kind: ChildKind) -> Callable[..., Any]:
    async def child_event(event: kopf.RawEvent, **_: Any) -> None:  # async: no thread hop
        manager.on_child(kind, dict(event))

    return child_event


async def run(
    manager: "Manager",
    *,
    streaming_lists: bool,
    namespaces: list[str],
    ready: asyncio.Event,
    stop: asyncio.Event,
) -> None:
    """kopf's watches, until `stop`. kopf sets `ready` once its watches are started."""
    kopf_seams.install()
    with kopf_seams.routed(routes_for(manager)):
        await until_stopped(
            kopf.operator(
                registry=registry_for(manager, streaming_lists=streaming_lists),
                clusterwide=not namespaces,
                namespaces=namespaces,
                standalone=True,
                ready_flag=ready,
                stop_flag=stop,
            ),
            lambda: manager.fatal,
        )


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
    "LIST_CHUNK",
    "POD_PLURAL",
    "POD_SELECTOR",
    "NoDiffBase",
    "configure",
    "registry_for",
    "routes_for",
    "run",
    "until_stopped",
]
