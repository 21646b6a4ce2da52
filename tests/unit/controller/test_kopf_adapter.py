"""The kopf adapter (`controller/kopf_adapter.py`): an error of kopf's stop after a fatal start-up problem does not
hide that problem's line (its watch streams and request path: controller/test_kopf_seams.py)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from log_capture import log_lines


async def _operator_raising(error: BaseException | None) -> None:
    await asyncio.sleep(0)
    if error is not None:
        raise error


@pytest.mark.parametrize(
    ("fatal", "error", "raised", "warned"),
    [
        pytest.param(
            "webhooks unreachable", AssertionError(), None, True, id="stopped for a fatal problem: its line wins"
        ),
        pytest.param(None, AssertionError(), AssertionError, False, id="no fatal problem: kopf's error is the news"),
        pytest.param("x", None, None, False, id="a clean stop after a fatal problem"),
        pytest.param(
            "x", asyncio.CancelledError(), asyncio.CancelledError, False, id="a cancellation is never swallowed"
        ),
    ],
)
def test_an_error_of_kopfs_stop_after_a_fatal_start_up_problem_does_not_hide_it(
    fatal: str | None,
    error: BaseException | None,
    raised: type[BaseException] | None,
    warned: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from trainjob_operator.controller.kopf_adapter import until_stopped

    def emit(_: Any) -> None:
        if raised is None:
            asyncio.run(until_stopped(_operator_raising(error), lambda: fatal))
        else:
            with pytest.raises(raised):
                asyncio.run(until_stopped(_operator_raising(error), lambda: fatal))

    lines = [json.loads(line) for line in log_lines("json", emit, capsys).splitlines()]
    said = [(line["level"], line["event"], line.get("error")) for line in lines]
    expected = (
        "warning",
        "kopf stopped with an error after a fatal start-up problem",
        "AssertionError: AssertionError()",
    )
    assert said == ([expected] if warned else [])


def _manager_watching_pods() -> Any:
    from fake_client import FakeClient
    from trainjob_operator.config import OperatorConfig
    from trainjob_operator.controller.manager import Manager
    from trainjob_operator.controller.store import PodCache

    manager = Manager(OperatorConfig(namespaces=["team-a"]), FakeClient())
    manager.store.pods = PodCache()  # the preflight found that RBAC allows watching pods
    return manager


def test_every_handler_registered_with_kopf_is_the_route_its_watchs_events_take() -> None:
    """The watches are said once (`Manager.watches()`): kopf's registry holds one event handler per watch and no
    other resource handler, and the seam's route of that watch calls that very handler, so no handler is registered
    whose body never runs; kopf's only other handlers are its settings and the login."""
    from trainjob_operator.controller.kopf_adapter import registry_and_routes

    manager = _manager_watching_pods()
    registry, routes = registry_and_routes(manager)
    handlers = registry._watching.get_all_handlers()
    registered: dict[tuple[str, str], object] = {
        (str(h.selector.group), str(h.selector.any_name)): h.fn for h in handlers if h.selector is not None
    }
    assert len(registered) == len(handlers)
    assert {key: route.event for key, route in routes.by_resource.items()} == registered
    assert all(routes.by_resource[key].event is fn for key, fn in registered.items())
    assert sorted(registered) == sorted((w.group, w.plural) for w in manager.watches())
    assert sorted(registered) == [
        ("", "pods"),
        ("jobset.x-k8s.io", "jobsets"),
        ("trainer.kubeflow.org", "clustertrainingruntimes"),
        ("trainer.kubeflow.org", "trainingruntimes"),
        ("trainer.kubeflow.org", "trainjobs"),
    ]
    assert not (registry._changing.get_all_handlers() or registry._spawning.get_all_handlers())
    assert not (registry._indexing.get_all_handlers() or registry._webhooks.get_all_handlers())
    assert sorted(getattr(h.fn, "__name__", "") for h in registry._activities.get_all_handlers()) == [
        "login",
        "startup",
    ]


def test_each_watchs_route_fills_its_cache_and_its_listing_marks_it_synced() -> None:
    """An event each watch's route delivers reaches the cache that watch declares; its listing-over marker
    completes that collection's sync."""
    from trainjob_operator.controller.kopf_adapter import registry_and_routes

    manager = _manager_watching_pods()
    _, routes = registry_and_routes(manager)
    for watch in manager.watches():
        meta: dict[str, Any] = {"name": "x", "uid": f"uid-{watch.plural}", "resourceVersion": "1"}
        if watch.namespaced:
            meta["namespace"] = "team-a"
        if watch.plural == "pods":
            meta["labels"] = {"jobset.sigs.k8s.io/jobset-name": "x"}
        route = routes.by_resource[(watch.group, watch.plural)]
        route.event({"type": None, "object": {"apiVersion": watch.api_version, "metadata": meta}})
        route.listed(None if not watch.namespaced else "team-a")
        key = ("", "x") if not watch.namespaced else ("team-a", "x")
        assert watch.cache.snapshot_keys() == [key], watch.plural
    assert manager.sync.pending() == ()


def test_the_pods_label_selector_is_the_pod_watchs_only() -> None:
    """kopf lists and watches only the pods a JobSet made (the selector the pod watch declares); nothing else is
    selected."""
    from trainjob_operator.controller._kopf import kopf
    from trainjob_operator.controller.kopf_adapter import configure

    settings = kopf.OperatorSettings()
    configure(settings, False, _manager_watching_pods().watches())

    def selector(group: str, plural: str) -> list[str]:
        return list(settings.watching.label_selectors.collect(kopf.Resource(group, "v1", plural)))

    assert selector("", "pods") == ["jobset.sigs.k8s.io/jobset-name"]
    assert selector("trainer.kubeflow.org", "trainjobs") == selector("jobset.x-k8s.io", "jobsets") == []


#: A process whose stop hangs: the signal handlers of `stop_on_signals`, then a stop that never ends (a task that
#: ignores the stop flag). It prints "ready" once the handlers are installed.
HANGING_STOP = """
import asyncio, sys
from trainjob_operator.controller import kopf_adapter

async def main():
    stop = asyncio.Event()
    kopf_adapter.stop_on_signals(stop, deadline=float(sys.argv[1]))
    print("ready", flush=True)
    await stop.wait()
    print("STOP FLAG SET", flush=True)
    await asyncio.Event().wait()  # the hung stop

asyncio.run(main())
"""

#: How the stop is asked, each a sentence: (signals sent, the deadline given, the bound on the time to the kill).
HANGS = {
    "one SIGTERM and a stop that hangs: killed at the deadline": ((signal.SIGTERM,), 1.0, (1.0, 30.0)),
    "a second signal (Ctrl-C twice): killed at once, long before the deadline": (
        (signal.SIGINT, signal.SIGINT),
        600.0,
        (0.0, 30.0),
    ),
}


@pytest.mark.parametrize("case", HANGS.values(), ids=HANGS.keys())
def test_a_stop_by_signal_that_hangs_is_killed(
    case: tuple[tuple[signal.Signals, ...], float, tuple[float, float]],
) -> None:
    """kopf arms a SIGKILL for a stop that hangs when its own signal handler runs; the operator replaces that handler
    (kopf_adapter.stop_on_signals), so it arms the same last resort itself."""
    signals, deadline, (at_least, at_most) = case
    proc = subprocess.Popen(
        [sys.executable, "-c", HANGING_STOP, str(deadline)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signals[0])
        lines = [proc.stdout.readline() for _ in range(2)]  # the log line of the stop, then the flag seen
        assert "STOP FLAG SET" in lines[-1], lines
        sent = time.monotonic()
        for sig in signals[1:]:
            proc.send_signal(sig)
        code = proc.wait(timeout=at_most)
        took = time.monotonic() - sent
        said = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
    assert code == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    assert at_least <= took + 0.05 <= at_most, took
    assert "killing the process" in said, said
