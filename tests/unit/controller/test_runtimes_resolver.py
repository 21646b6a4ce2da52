"""The runtime lookup the reconciler and the webhooks share (controller/runtimes.py): a blip of the API server on a
cache miss is read again, so an admission is not refused for it; what is not a blip is raised at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from builders import RuntimeBuilder
from fake_client import FakeClient
from trainjob_operator.api.runtime import SHIPPED_MODELS
from trainjob_operator.controller import runtimes
from trainjob_operator.controller.runtimes import RuntimeResolver
from trainjob_operator.controller.store import Store
from trainjob_operator.k8s.client import ApiError

RUNTIME = RuntimeBuilder.make().raw()


def flaky(failures: list[BaseException]) -> FakeClient:
    """The API holding the runtime, whose next reads fail with `failures`, one each."""
    client = FakeClient().put(RUNTIME)
    for failure in failures:
        client.fail("get", failure, times=1)
    return client


def gets(client: FakeClient) -> int:
    return sum(call[0] == "get" for call in client.calls)


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtimes, "READ_ATTEMPTS", (0.0, 0.0, 0.0))


def lookup(client: FakeClient) -> Any:
    resolver = RuntimeResolver(client, Store(), SHIPPED_MODELS)
    kind, name = RUNTIME["kind"], RUNTIME["metadata"]["name"]
    return asyncio.run(resolver.lookup(kind, RUNTIME["metadata"].get("namespace") or "default", name))


def test_a_500_then_a_cut_connection_are_read_again_and_the_runtime_is_found() -> None:
    client = flaky([ApiError(500, "InternalError", "injected", {}), ConnectionResetError("reset")])
    assert lookup(client) is not None
    assert gets(client) == 3


def test_a_refusal_that_is_not_a_blip_is_raised_at_once() -> None:
    client = flaky([ApiError(403, "Forbidden", "no", {})])
    with pytest.raises(ApiError):
        lookup(client)
    assert gets(client) == 1


def test_an_api_server_that_keeps_failing_is_raised_after_four_reads() -> None:
    client = flaky([ApiError(503, "ServiceUnavailable", "down", {}) for _ in range(10)])
    with pytest.raises(ApiError):
        lookup(client)
    assert gets(client) == 4
