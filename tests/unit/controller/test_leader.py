"""Leader election (`controller/leader.py`) without split brain: a leader that cannot renew stops leading at the
renew deadline, leadership lapses with time even when the loop is stuck, and a replica whose lease lapsed sends no
write."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from builders import ManualClock
from fake_client import FakeClient
from trainjob_operator.controller.leader import LeaderElector
from trainjob_operator.controller.reconciler import NotLeading, Reconciler
from trainjob_operator.controller.store import Store
from trainjob_operator.k8s.client import ApiError
from trainjob_operator.metrics import Metrics
from trainjob_operator.runtime.pipeline import Framework

# --- leader election ------------------------------------------------------------------------------------------


def elector(client: FakeClient, clock: ManualClock) -> LeaderElector:
    return LeaderElector(
        client,
        "ns",
        "lease",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        identity="me",
        clock=clock,
    )


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(aiohttp.ServerDisconnectedError(), id="aiohttp's server disconnected (not an OSError)"),
        pytest.param(aiohttp.ClientPayloadError("cut"), id="aiohttp's payload error"),
        pytest.param(ApiError(503, "ServiceUnavailable", "etcd leader changed"), id="a 503 from the API server"),
        pytest.param(TimeoutError(), id="a timeout"),
    ],
)
def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline(failure: BaseException) -> None:
    clock = ManualClock()
    client = FakeClient()
    le = elector(client, clock)

    async def scenario() -> list[tuple[float, bool]]:
        await le.attempt()
        seen = [(0.0, le.leading())]
        client.fail("get", failure)  # every read of the Lease from now on
        for step in (2, 4, 6, 8, 9.9, 10.1, 12):
            clock.now = 1000.0 + step
            await le.attempt()
            seen.append((step, le.leading()))
        return seen

    assert asyncio.run(scenario()) == [
        (0.0, True),
        (2, True),
        (4, True),
        (6, True),
        (8, True),
        (9.9, True),
        (10.1, False),
        (12, False),
    ]


def test_leadership_lapses_with_time_even_when_the_loop_is_stuck() -> None:
    """No attempt runs (the loop hangs): `leading()` alone turns false once the renew deadline passed."""
    clock = ManualClock()
    le = elector(FakeClient(), clock)
    asyncio.run(le.attempt())
    clock.now += 10.5
    assert (le.leading(), le.is_leader, le.heartbeat_age()) == (False, False, 10.5)


def test_an_unexpected_failure_in_the_election_steps_down_at_once() -> None:
    clock = ManualClock()
    client = FakeClient()
    le = elector(client, clock)

    async def scenario() -> tuple[bool, bool]:
        await le.attempt()
        before = le.leading()
        client.fail("get", KeyError("spec"), times=1)
        clock.now += 1
        await le.attempt()
        return before, le.leading()

    assert asyncio.run(scenario()) == (True, False)


def test_a_replica_whose_lease_lapsed_sends_no_write() -> None:
    sent: list[str] = []

    async def request() -> None:
        sent.append("PATCH")

    reconciler = Reconciler(FakeClient(), Store(), Framework.from_registry(), Metrics(), may_write=lambda: False)

    async def scenario() -> None:
        await reconciler._write("apply", request())

    with pytest.raises(NotLeading):
        asyncio.run(scenario())
    assert sent == []
