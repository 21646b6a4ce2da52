"""Contract tests of kopf's private seams (`controller/kopf_seams.py`): kopf's real watch loop (`infinite_watch`) and
request path (`api.request`), with the seams installed, against the fake API server over real HTTP. Each fails if
kopf stops calling a seam: events would not reach our routes, the listing-over marker would not fire, a 5xx's
Retry-After would be retried after kopf's own backoff, a failed stream would end the operator."""

import asyncio
import json
import logging
import os
import re
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from kopf._cogs.clients import api, auth, errors, watching
from kopf._cogs.structs import credentials, references

from fake_apiserver import CUT, DROP, END, FakeApiServer, Kind, Seen, error_event
from trainjob_operator.config import OperatorConfig
from trainjob_operator.controller import kopf_adapter, kopf_seams, main
from trainjob_operator.controller._kopf import kopf
from trainjob_operator.controller.preflight import StartupError
from trainjob_operator.k8s import connection as k8s_config
from trainjob_operator.k8s.client import Client
from trainjob_operator.k8s.connection import Connection
from trainjob_operator.metrics import Metrics

TRAINJOBS = Kind("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
RUNTIMES = Kind("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime")
CLUSTER_RUNTIMES = Kind("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False)
JOBSETS = Kind("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
DEADLINE = 10.0


def obj(name: str, namespace: str = "team-a") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"}}


def event(type_: str, name: str) -> dict[str, Any]:
    return {"type": type_, "object": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", **obj(name)}}


def initial_events_end() -> dict[str, Any]:
    """The bookmark that ends a streamed initial listing (`sendInitialEvents`)."""
    return {
        "type": "BOOKMARK",
        "object": {"metadata": {"resourceVersion": "200", "annotations": {"k8s.io/initial-events-end": "true"}}},
    }


async def until(done: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.01)


def plain_connection(server: str, **extra: Any) -> Connection:
    return Connection(
        server=server,
        ssl_context=k8s_config.ssl_context(extra.pop("ca_pem", None), None, None, None, False),
        authorization="Bearer t",
        **extra,
    )


@dataclass
class Watched:
    """What one watch through kopf's loop delivered: to our route (in order), and on to kopf."""

    log: list[tuple[str | None, str | None]] = field(default_factory=list)
    to_kopf: list[Any] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)

    def event(self, e: dict[str, Any]) -> None:
        if e["object"]["metadata"]["name"] == "bad":
            raise ValueError("a bug in one handler")
        self.log.append((e["type"], e["object"]["metadata"]["name"]))
        self.objects.append(e["object"])

    def listed(self, namespace: str | None) -> None:
        self.log.append(("listed", namespace))


@pytest.fixture(autouse=True)
def quick_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kopf_seams, "WATCH_RESTART_PAUSE", 0.01)


async def watch_through_kopf(
    fake: FakeApiServer,
    done: Callable[[Watched], bool],
    *,
    namespace: str | None = None,
    streaming: bool = False,
    chunk: int = 2,
) -> tuple[Watched, BaseException | None]:
    """kopf's own `infinite_watch` of TrainJobs, with the seams installed and a route to a recorder, logged in with
    the operator's client as its session, until `done` or the watch ends; the error it ended with, if any."""
    kopf_seams.install()
    settings = kopf.OperatorSettings()
    kopf_adapter.configure(settings, streaming_lists=streaming)
    settings.watching.chunk_size = chunk
    settings.networking.error_backoffs = [0.05, 0.05]
    settings.watching.reconnect_backoff = 0.01
    client = Client(plain_connection(fake.url), qps=0, burst=0)
    session = client.as_session()
    vault = credentials.Vault({"fake": kopf.AiohttpSession(aiohttp_session=session, server=fake.url)})
    vault_token = auth.vault_var.set(vault)
    resource = references.Resource(
        group=TRAINJOBS.group,
        version=TRAINJOBS.version,
        plural=TRAINJOBS.plural,
        kind=TRAINJOBS.kind,
        namespaced=TRAINJOBS.namespaced,
    )
    watched = Watched()

    async def consume() -> None:
        async for e in watching.infinite_watch(
            settings=settings,
            resource=resource,
            namespace=references.NamespaceName(namespace) if namespace is not None else None,
        ):
            watched.to_kopf.append(e)

    with kopf_seams.routed(
        kopf_seams.Routes({(TRAINJOBS.group, TRAINJOBS.plural): kopf_seams.Route(watched.event, watched.listed)})
    ):
        task = asyncio.create_task(consume())
    try:
        await until(lambda: done(watched) or task.done(), "the watch to deliver what the test waits for")
        ended = task.exception() if task.done() else None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await vault.close()
        await session.close()  # kopf closes it only if it sent a request
        await client.close()
        auth.vault_var.reset(vault_token)
    return watched, ended


def watch(seen: Seen) -> bool:
    return seen.watch


def listing(seen: Seen) -> bool:
    return not seen.watch


@dataclass(frozen=True)
class Case:
    setup: Callable[[FakeApiServer], None]
    done: Callable[[Watched], bool]
    log: list[tuple[str | None, str | None]]
    lists: int
    streaming: bool = False
    namespace: str | None = None


def listed_times(n: int) -> Callable[[Watched], bool]:
    return lambda w: sum(1 for t, _ in w.log if t == "listed") >= n


def _paged(fake: FakeApiServer) -> None:
    fake.add(TRAINJOBS, obj("a"), obj("b"), obj("c"))
    fake.script_watch(TRAINJOBS, event("ADDED", "d"), event("MODIFIED", "a"))


def _streamed(fake: FakeApiServer) -> None:
    fake.script_watch(TRAINJOBS, event("ADDED", "a"), event("ADDED", "b"), initial_events_end(), event("MODIFIED", "a"))


def _error_event(code: int) -> Callable[[FakeApiServer], None]:
    def setup(fake: FakeApiServer) -> None:
        fake.add(TRAINJOBS, obj("a"))
        fake.script_watch(TRAINJOBS, event("ADDED", "b"), error_event(code, "etcdserver: request timed out"))

    return setup


def _watch_answered(code: int, times: int) -> Callable[[FakeApiServer], None]:
    def setup(fake: FakeApiServer) -> None:
        fake.add(TRAINJOBS, obj("a"))
        fake.answer(watch, code, times=times)

    return setup


def _cut(fake: FakeApiServer) -> None:
    fake.add(TRAINJOBS, obj("a"))
    fake.script_watch(TRAINJOBS, event("ADDED", "b"), CUT)


def _dropped(fake: FakeApiServer) -> None:
    fake.add(TRAINJOBS, obj("a"))
    fake.script_watch(TRAINJOBS, event("ADDED", "b"), DROP)
    fake.script_watch(TRAINJOBS, event("MODIFIED", "b"))


def _ended(fake: FakeApiServer) -> None:
    fake.add(TRAINJOBS, obj("a"))
    fake.script_watch(TRAINJOBS, event("ADDED", "b"), END)
    fake.script_watch(TRAINJOBS, event("MODIFIED", "b"))


def _bad_object(fake: FakeApiServer) -> None:
    fake.add(TRAINJOBS, obj("a"), obj("bad"), obj("c"))


RELISTED = [(None, "a"), ("listed", None), (None, "a"), ("listed", None)]

CASES = {
    "a paged listing then the watch's events reach the route in order, the listing-over marker between them": Case(
        _paged,
        lambda w: len(w.log) == 6,
        [(None, "a"), (None, "b"), (None, "c"), ("listed", None), ("ADDED", "d"), ("MODIFIED", "a")],
        lists=2,  # two pages of two
    ),
    "a namespaced watch's listing-over marker names its namespace (the cache it syncs)": Case(
        _paged,
        lambda w: len(w.log) == 6,
        [(None, "a"), (None, "b"), (None, "c"), ("listed", "team-a"), ("ADDED", "d"), ("MODIFIED", "a")],
        lists=2,
        namespace="team-a",
    ),
    "a streamed initial listing (sendInitialEvents) ends with the same marker, and no LIST is sent": Case(
        _streamed,
        lambda w: len(w.log) == 4,
        [(None, "a"), (None, "b"), ("listed", None), ("MODIFIED", "a")],
        lists=0,
        streaming=True,
    ),
    "an ERROR event other than 410 in the stream lists again (kopf would end the operator)": Case(
        _error_event(500), listed_times(2), [(None, "a"), ("listed", None), ("ADDED", "b"), *RELISTED[2:]], lists=2
    ),
    "a 403 ERROR event in the stream lists again": Case(
        _error_event(403), listed_times(2), [(None, "a"), ("listed", None), ("ADDED", "b"), *RELISTED[2:]], lists=2
    ),
    "a 410 ERROR event lists again (kopf's own restart)": Case(
        _error_event(410), listed_times(2), [(None, "a"), ("listed", None), ("ADDED", "b"), *RELISTED[2:]], lists=2
    ),
    "a 410 answered as the watch request's status lists again": Case(
        _watch_answered(410, 1), listed_times(2), RELISTED, lists=2
    ),
    "a 5xx on the watch request past kopf's retries lists again": Case(
        _watch_answered(500, 3), listed_times(2), RELISTED, lists=2
    ),
    "a stream cut mid-line lists again": Case(
        _cut, listed_times(2), [(None, "a"), ("listed", None), ("ADDED", "b"), *RELISTED[2:]], lists=2
    ),
    "a dropped connection watches on from the last resource version (kopf's own), without listing again": Case(
        _dropped, lambda w: len(w.log) == 4, [(None, "a"), ("listed", None), ("ADDED", "b"), ("MODIFIED", "b")], lists=1
    ),
    "a stream the server ends watches on from the last resource version, without listing again": Case(
        _ended, lambda w: len(w.log) == 4, [(None, "a"), ("listed", None), ("ADDED", "b"), ("MODIFIED", "b")], lists=1
    ),
    "a handler that raises loses its event, not the watch": Case(
        _bad_object, listed_times(1), [(None, "a"), (None, "c"), ("listed", None)], lists=2
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_kopfs_watch_loop_with_the_seams(case: Case) -> None:
    async def scenario() -> dict[str, Any]:
        async with FakeApiServer([TRAINJOBS]) as fake:
            case.setup(fake)
            watched, ended = await watch_through_kopf(
                fake, case.done, streaming=case.streaming, namespace=case.namespace
            )
            return {
                "log": watched.log,
                "to kopf": watched.to_kopf,
                "ended with": ended,
                "lists": len(fake.requests("trainjobs", watch=False)),
            }

    assert asyncio.run(scenario()) == {
        "log": case.log,
        "to kopf": [watching.Bookmark.LISTED] * sum(1 for t, _ in case.log if t == "listed"),
        "ended with": None,
        "lists": case.lists,
    }


def test_a_404_still_ends_the_watch() -> None:
    """The CRD is gone: listing again cannot help; the operator stops and its start-up checks say what is missing."""

    async def scenario() -> BaseException | None:
        async with FakeApiServer([TRAINJOBS]) as fake:
            fake.answer(listing, 404)
            return (await watch_through_kopf(fake, lambda w: False))[1]

    assert isinstance(asyncio.run(scenario()), errors.APINotFoundError)


def test_a_5xx_with_retry_after_is_waited_out_not_retried_after_kopfs_backoff() -> None:
    """kopf's request loop honours Retry-After only on 429 and would send again after its own first backoff (0.05 s
    here); client-go waits as asked for any 5xx (issue 17: kopf listed again 1 s after a 503 that asked for 2-3 s)."""

    async def scenario() -> list[float]:
        async with FakeApiServer([TRAINJOBS]) as fake:
            fake.add(TRAINJOBS, obj("a"))
            fake.answer(listing, 503, retry_after="1")
            await watch_through_kopf(fake, listed_times(1))
            return [s.at for s in fake.requests("trainjobs", watch=False)]

    first, second = asyncio.run(scenario())
    assert second - first >= 0.95


# --- the start-up check -----------------------------------------------------------------------------------------


def test_the_installed_kopf_has_every_seam_and_they_are_installed_once() -> None:
    assert kopf_seams.missing() == []
    kopf_seams.install()
    kopf_seams.install()
    assert isinstance(api.json, kopf_seams.StreamDecoder)  # type: ignore[attr-defined]
    assert kopf_seams.installed()
    assert getattr(watching.continuous_watch, "trainjob_seam", None) == "resilient_watch"
    assert not getattr(vars(watching.continuous_watch)["__wrapped__"], "trainjob_seam", None)
    assert getattr(errors.check_response, "trainjob_seam", None) == "retry_after_on_server_errors"
    assert not getattr(vars(errors.check_response)["__wrapped__"], "trainjob_seam", None)


async def _a_watch_loop_that_does_not_call_the_seam(**_: Any) -> AsyncIterator[Any]:
    yield None


async def _continuous_watch_with_another_signature(*, settings: Any, resource: Any) -> AsyncIterator[Any]:
    yield None


def _check_response_not_async(response: Any) -> None:
    return None


class _ErrorWithoutPayload(Exception):
    def __init__(self, payload: Any = None, *, status: int, headers: dict[str, str]) -> None:
        super().__init__(payload)


async def _a_stream_that_decodes_otherwise(**_: Any) -> AsyncIterator[Any]:
    yield None


BROKEN = {
    "api.stream no longer decodes with json.loads through its module": (
        api,
        "stream",
        _a_stream_that_decodes_otherwise,
        "kopf's api.stream no longer decodes events with json.loads through its module",
    ),
    "infinite_watch stops calling continuous_watch through its module": (
        watching,
        "infinite_watch",
        _a_watch_loop_that_does_not_call_the_seam,
        "kopf's infinite_watch no longer calls continuous_watch through its module",
    ),
    "continuous_watch takes other arguments": (
        watching,
        "continuous_watch",
        _continuous_watch_with_another_signature,
        "kopf's continuous_watch takes (settings, resource)",
    ),
    "check_response is no longer a coroutine": (
        errors,
        "check_response",
        _check_response_not_async,
        "kopf._cogs.clients.errors.check_response is not `async def check_response(response)`",
    ),
    "APIError keeps no _payload": (
        errors,
        "APIError",
        _ErrorWithoutPayload,
        "kopf's APIError no longer keeps the answered Status in _payload",
    ),
    "the listing-over marker is renamed": (
        watching,
        "Bookmark",
        type("Bookmark", (), {}),
        "kopf's watching.Bookmark.LISTED (the listing-over marker) is gone",
    ),
}


@pytest.mark.parametrize(("module", "name", "replacement", "problem"), list(BROKEN.values()), ids=list(BROKEN))
def test_a_kopf_without_a_seam_stops_the_operator_at_start_up_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    name: str,
    replacement: Any,
    problem: str,
) -> None:
    """Checked before anything else (no kubeconfig is read): `run` exits 3 with this line."""
    monkeypatch.setattr(module, name, replacement)
    assert kopf_seams.missing() == [problem]
    with pytest.raises(StartupError) as err:
        asyncio.run(main.serve(OperatorConfig(), kubeconfig="/nonexistent"))
    assert str(err.value) == (
        f"kopf {kopf_seams.KOPF_VERSION} lacks what the operator relies on (checked against "
        f"kopf {kopf_seams.CHECKED_AGAINST}): {problem}; install kopf=={kopf_seams.CHECKED_AGAINST} "
        "(docs/architecture.md, 'Other libraries' private behaviour')"
    )


def test_only_the_seams_module_and_its_contract_tests_reach_into_kopfs_private_modules() -> None:
    """import-linter sees external packages only whole (`kopf`), so this walk keeps the rule: one module to read
    when kopf changes."""
    root = Path(__file__).resolve().parents[3]
    reaching = sorted(
        str(path.relative_to(root))
        for top in ("src", "tests", "bench", "hack")
        for path in (root / top).rglob("*.py")
        if re.search(r"\bkopf\._[a-z]", path.read_text(encoding="utf-8"))
    )
    assert reaching == ["src/trainjob_operator/controller/kopf_seams.py", "tests/unit/controller/test_kopf_seams.py"]


# --- kopf's requests go out as the operator client's -----------------------------------------------------------


def test_without_tls_server_name_the_fake_servers_certificate_is_refused() -> None:
    """The control for the test below: the certificate names another host than the address served."""

    async def scenario() -> None:
        async with FakeApiServer([TRAINJOBS], tls_name="kube-apiserver.internal") as fake:
            assert fake.bundle is not None
            client = Client(plain_connection(fake.url, ca_pem=fake.bundle.ca_cert.decode()), qps=0, burst=0)
            session = client.as_session()
            try:
                with pytest.raises(aiohttp.ClientConnectorCertificateError):
                    await session.get(f"{fake.url}/version")
            finally:
                await session.close()
                await client.close()

    asyncio.run(scenario())


def test_kopfs_requests_honour_tls_server_name_count_in_the_metrics_and_take_the_clients_tokens() -> None:
    """The whole kopf adapter (`kopf.operator` with our registry, login handler and seams) against the fake server
    over TLS: the caches fill and count as synced; every request kopf sent carried the client's credentials, went to
    `tls-server-name`, was counted in the request metrics and took a token from the client's limiter."""

    async def scenario() -> dict[str, Any]:
        async with FakeApiServer(
            [TRAINJOBS, RUNTIMES, CLUSTER_RUNTIMES, JOBSETS], tls_name="kube-apiserver.internal"
        ) as fake:
            assert fake.bundle is not None
            fake.add(TRAINJOBS, obj("a"), obj("b"))
            fake.add(JOBSETS, obj("a"))
            fake.add(CLUSTER_RUNTIMES, {"metadata": {"name": "torch"}})
            connection = plain_connection(
                fake.url, ca_pem=fake.bundle.ca_cert.decode(), tls_server_name="kube-apiserver.internal"
            )
            metrics = Metrics()
            cfg = OperatorConfig()
            cfg.status_server.enabled = False
            async with Client(connection, qps=1000, burst=1, on_request=metrics.record_request) as client:
                manager = main.Manager(cfg, client, metrics)
                run = asyncio.create_task(
                    kopf_adapter.run(
                        manager, streaming_lists=False, namespaces=[], ready=manager.kopf_ready, stop=manager.stop
                    )
                )
                try:
                    await until(manager.caches_synced, "the caches to count as synced")
                finally:
                    manager.stop.set()
                    fake.end_streams()
                    await asyncio.wait_for(run, DEADLINE)
                counted = {
                    (s.labels["verb"], s.labels["resource"]): s.value
                    for m in metrics.api_requests.collect()
                    for s in m.samples
                    if s.name.endswith("_total")
                }
                return {
                    "trainjobs": sorted(manager.store.trainjobs.snapshot_keys()),
                    "authorization": {s.headers.get("Authorization") for s in fake.seen},
                    "watches counted": {r: counted.get(("GET", r), 0) >= 2 for r in ("trainjobs", "jobsets")},
                    "limiters": sorted(client.limiters),
                }

    assert asyncio.run(scenario()) == {
        "trainjobs": [("team-a", "a"), ("team-a", "b")],
        "authorization": {"Bearer t"},
        "watches counted": {"trainjobs": True, "jobsets": True},  # a LIST and a watch each
        "limiters": ["", "clustertrainingruntimes", "jobsets", "trainingruntimes", "trainjobs"],  # "": discovery
    }


#: How the operator is told to stop, each a sentence.
STOPS: dict[str, Callable[[main.Manager], None]] = {
    "the operator's stop flag set": lambda manager: manager.stop.set(),
    # kopf's own handler would stop it by its signal future instead, leaving its stop-flag waiter pending for 5 s
    "a pod's SIGTERM sent to this process": lambda manager: os.kill(os.getpid(), signal.SIGTERM),
}


@pytest.mark.parametrize("stop", list(STOPS))
def test_kopfs_stop_ends_its_own_tasks_and_leaves_the_others_running(stop: str) -> None:
    """The whole kopf adapter, stopped: the operator's stop flag is set (the runnables stop after kopf); kopf's own
    tasks are all done once the adapter returns; a task started after kopf (as a webhook connection's is) is neither
    waited for nor cancelled (kopf.operator waited 5 s, then cancelled it: its socket stayed open and the API
    server's next call on it hung)."""

    async def scenario() -> dict[str, Any]:
        async with FakeApiServer([TRAINJOBS, RUNTIMES, CLUSTER_RUNTIMES, JOBSETS]) as fake:
            cfg = OperatorConfig()
            cfg.status_server.enabled = False
            async with Client(plain_connection(fake.url), qps=0, burst=0) as client:
                manager = main.Manager(cfg, client, Metrics())
                run = asyncio.create_task(
                    kopf_adapter.run(
                        manager, streaming_lists=False, namespaces=[], ready=manager.kopf_ready, stop=manager.stop
                    )
                )
                await until(manager.caches_synced, "the caches to count as synced")
                connection = asyncio.create_task(asyncio.Event().wait())  # a server's connection, started later
                kopfs = {t for t in asyncio.all_tasks() if kopf_seams.is_kopfs(t)}
                STOPS[stop](manager)
                await until(manager.stop.is_set, "the operator's stop flag set")
                fake.end_streams()
                await asyncio.wait_for(run, DEADLINE)
                left = {
                    "connection cancelled": connection.cancelled(),
                    "kopf's tasks seen": len(kopfs) > 0,
                    "kopf's tasks left running": sorted(t.get_name() for t in kopfs if not t.done()),
                }
                connection.cancel()
                return left

    assert asyncio.run(scenario()) == {
        "connection cancelled": False,
        "kopf's tasks seen": True,
        "kopf's tasks left running": [],
    }


def test_foreign_tasks_hold_every_task_but_kopfs() -> None:
    """`kopf.run_tasks(ignored=ForeignTasks())` asks membership only: ours and aiohttp's are in, kopf's are not."""

    async def scenario() -> dict[str, bool]:
        from kopf._cogs.aiokits import aiotasks

        ours = asyncio.create_task(asyncio.sleep(0))
        kopfs = asyncio.create_task(aiotasks.wait([ours]))
        await asyncio.gather(ours, kopfs)
        return {"ours ignored": ours in kopf_seams.ForeignTasks(), "kopf's ignored": kopfs in kopf_seams.ForeignTasks()}

    assert asyncio.run(scenario()) == {"ours ignored": True, "kopf's ignored": False}


def test_a_429_kopf_gets_pauses_the_resource_for_the_clients_own_requests_too() -> None:
    """One pace per resource, whoever sends: the client's limiter holds for the Retry-After kopf was answered."""

    async def scenario() -> float:
        async with FakeApiServer([TRAINJOBS]) as fake:
            fake.answer(listing, 429, retry_after="0.5")
            async with Client(plain_connection(fake.url), qps=0, burst=0) as client:
                session = client.as_session()
                try:
                    async with session.get(f"{fake.url}/apis/trainer.kubeflow.org/v1alpha1/trainjobs") as response:
                        assert response.status == 429
                    await client.request("GET", "/apis/trainer.kubeflow.org/v1alpha1/trainjobs")
                finally:
                    await session.close()
            first, second = fake.requests("trainjobs")
            return second.at - first.at

    assert asyncio.run(scenario()) >= 0.45


async def kopfs_request_of_trainjobs(fake: FakeApiServer, backoffs: list[float], logger: logging.Logger) -> None:
    """One GET of the TrainJobs through kopf's real request path (`api.request`), its own session closed after."""
    context = auth.APIContext(credentials.ConnectionInfo(server=fake.url))
    try:
        await api.request(
            "GET",
            "/apis/trainer.kubeflow.org/v1alpha1/trainjobs",
            settings=kopf.OperatorSettings(),
            backoffs=backoffs,
            context=context,
            logger=logger,
        )
    finally:
        await context.session.close()


def test_kopfs_request_path_raises_what_the_seam_makes_of_each_answer() -> None:
    """kopf's `api.request` with the seam: which answers it waits out (its 429 class) and which it raises as kopf
    did; the status stays the server's."""
    kopf_seams.install()

    async def answered(code: int, retry_after: str | None) -> tuple[str, int, str | None]:
        async with FakeApiServer([TRAINJOBS]) as fake:
            fake.answer(listing, code, retry_after=retry_after, times=2)
            try:
                await kopfs_request_of_trainjobs(fake, backoffs=[], logger=logging.getLogger("test"))
            except errors.APIError as err:
                return type(err).__name__, err.status, err.message  # the message: the Status kept (`_payload`)
            return "answered", 200, None

    table = {
        "a 503 with Retry-After": ((503, "2"), ("APITooManyRequestsError", 503, "forced 503")),
        "a 500 with Retry-After": ((500, "1"), ("APITooManyRequestsError", 500, "forced 500")),
        "a 503 without Retry-After: kopf's own backoff": ((503, None), ("APIServerError", 503, "forced 503")),
        "a 404 with Retry-After: as kopf raised it": ((404, "2"), ("APINotFoundError", 404, "forced 404")),
    }
    got = {why: asyncio.run(answered(*answer)) for why, (answer, _) in table.items()}
    assert got == {why: want for why, (_, want) in table.items()}


def test_kopfs_retried_429_is_logged_at_info_by_its_own_words(capsys: pytest.CaptureFixture[str]) -> None:
    """`logs.RetriedRequests` knows kopf's retry line by its words ("failed; will retry"): kopf's real request path
    answered a 429, then 200, must give one info line, not an error (issue 27: "storage is (re)initializing")."""
    from trainjob_operator import logs

    logs.configure("json", "INFO")

    async def scenario() -> None:
        async with FakeApiServer([TRAINJOBS]) as fake:
            fake.answer(listing, 429, retry_after="0.01", times=1)
            await kopfs_request_of_trainjobs(fake, backoffs=[0.01], logger=logging.getLogger("kopf.objects"))

    asyncio.run(scenario())
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    retried = [
        (line["level"], "APITooManyRequestsError" in line["event"]) for line in lines if "will retry" in line["event"]
    ]
    assert retried == [("info", True)]


# --- which failures of a stream list again: every error class kopf lets out of `continuous_watch` ----------------


def _kopf_error(status: int, retry_after: bool = False) -> Exception:
    """As kopf raises it; a 5xx with Retry-After as `retry_after_on_server_errors` raises it (kopf's 429 class)."""
    cls = errors.APIServerError if status >= 500 else errors.APIClientError
    if retry_after:
        cls = errors.APITooManyRequestsError
    # A partial Status, as API servers send them (kopf's RawStatus TypedDict names every field: deliberately less).
    raw = cast(errors.RawStatus, {"kind": "Status", "code": status, "message": "too old resource version: 1 (2)"})
    return cls(
        raw,
        status=status,
        headers={"Retry-After": "1"} if retry_after else {},
    )


STREAM_FAILURES = {
    "410 Gone as the watch request's status: list again": (_kopf_error(410), True),
    "a 5xx past kopf's retries: list again": (_kopf_error(503), True),
    "429 past kopf's retries: list again": (_kopf_error(429), True),
    "403 (seen during upgrades) past kopf's retries: list again": (_kopf_error(403), True),
    "a 503 with Retry-After past kopf's retries": (_kopf_error(503, retry_after=True), True),
    "an ERROR event in the stream (kopf's WatchingError): list again": (watching.WatchingError("500"), True),
    "a connection error past kopf's retries: list again": (aiohttp.ServerDisconnectedError(), True),
    "a timeout: list again": (TimeoutError(), True),
    "a stream cut mid-line (not JSON): list again": (json.JSONDecodeError("Expecting value", "", 0), True),
    "a stream cut inside a character: list again": (
        UnicodeDecodeError("utf-8", b"\xe2\x82", 0, 2, "unexpected end of data"),
        True,
    ),
    "404 (the CRD is gone): still fatal": (_kopf_error(404), False),
    "422: still fatal": (_kopf_error(422), False),
    "a bug: still fatal": (ValueError("bug"), False),
}


@pytest.mark.parametrize(("error", "survives"), list(STREAM_FAILURES.values()), ids=list(STREAM_FAILURES))
def test_a_failed_watch_stream_lists_again_instead_of_ending_the_operator(error: Exception, survives: bool) -> None:
    """Before: kopf's watcher raised, its orchestrator failed and the operator stopped (exit 1) after 17 s of
    hostile network (issue 17); kopf only restarts on a 410 ERROR event inside the stream."""

    async def stream(**_: Any) -> AsyncIterator[Any]:
        yield {"type": "ADDED", "object": {}}
        raise error

    async def consume() -> list[Any]:
        return [e async for e in kopf_seams.resilient_watch(stream)(resource="jobsets")]

    if survives:
        assert asyncio.run(consume()) == [{"type": "ADDED", "object": {}}]
    else:
        with pytest.raises(type(error)):
            asyncio.run(consume())


def test_kopfs_stream_decodes_through_the_seam_as_the_standard_library_would() -> None:
    """kopf's real watch loop, the events decoded by `StreamDecoder` (orjson): the objects are what `json.loads` makes
    of the same lines, an integer past 64 bits (which orjson refuses) and floats included; a line cut mid-event
    still lists again (its error is still `json.JSONDecodeError`)."""
    odd = {"huge": 2**70, "negative": -(2**65), "float": 0.1, "exp": 1e300, "text": "ü\u2028"}
    added = event("ADDED", "b")
    added["object"]["spec"] = odd
    decoded: list[Any] = []
    loads = kopf_seams.StreamDecoder.loads

    def counting(text: str | bytes) -> Any:
        decoded.append(text)
        return loads(text)

    async def scenario() -> Watched:
        async with FakeApiServer([TRAINJOBS]) as fake:
            fake.add(TRAINJOBS, obj("a"))
            fake.script_watch(TRAINJOBS, added, CUT)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(kopf_seams.StreamDecoder, "loads", staticmethod(counting))
                watched, ended = await watch_through_kopf(fake, listed_times(2))
            assert ended is None
            return watched

    watched = asyncio.run(scenario())
    assert watched.log == [(None, "a"), ("listed", None), ("ADDED", "b"), (None, "a"), ("listed", None)]
    [b] = [o for o in watched.objects if o["metadata"]["name"] == "b"]
    assert b["spec"] == json.loads(json.dumps(odd)) and b["spec"]["huge"] == 2**70
    assert len(decoded) >= 1, "the watch's lines went through the seam"
