"""The client's retries (`k8s/client.py`): which errors are transient, the Retry-After header, and Retry-After
honoured for the object it was about (found by the hostile network, issue 17)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from trainjob_operator.k8s.client import ApiError, is_transient, parse_retry_after


@pytest.mark.parametrize(
    ("err", "transient"),
    [
        pytest.param(aiohttp.ServerDisconnectedError(), True, id="a disconnect"),
        pytest.param(ConnectionResetError(), True, id="a reset"),
        pytest.param(ApiError(429, "TooManyRequests", "slow down"), True, id="429"),
        pytest.param(ApiError(500, "InternalError", "x"), True, id="500"),
        pytest.param(ApiError(422, "Invalid", "x"), False, id="422 is about the object"),
        pytest.param(KeyError("x"), False, id="a bug"),
    ],
)
def test_transient_errors(err: BaseException, transient: bool) -> None:
    assert is_transient(err) is transient


@pytest.mark.parametrize(
    ("header", "seconds"), [("3", 3.0), ("0.5", 0.5), (None, None), ("soon", None), ("-4", 0.0), ("99999", 600.0)]
)
def test_retry_after_header(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header) == seconds


# --- Retry-After is honoured for the object it was about (found by the hostile network, issue 17) ----------------


@pytest.mark.parametrize(
    ("method", "path", "body", "want"),
    [
        pytest.param(
            "PATCH",
            "/apis/g/v1/namespaces/n/trainjobs/a/status",
            None,
            "/apis/g/v1/namespaces/n/trainjobs/a",
            id="a status write is about the object itself",
        ),
        pytest.param(
            "GET",
            "/apis/g/v1/namespaces/n/trainjobs/a?x=1",
            None,
            "/apis/g/v1/namespaces/n/trainjobs/a",
            id="the query does not matter",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces/n/configmaps",
            {"metadata": {"name": "a-snap"}},
            "/api/v1/namespaces/n/configmaps/a-snap",
            id="a create is about the object it creates",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces/n/events",
            {"metadata": {"generateName": "a."}},
            "/api/v1/namespaces/n/events/a.",
            id="a generated name: its prefix",
        ),
    ],
)
def test_what_a_retry_after_is_about(method: str, path: str, body: Any, want: str) -> None:
    from trainjob_operator.k8s.client import retry_key

    assert retry_key(method, path, body) == want


def test_after_a_503_with_retry_after_the_next_request_for_that_object_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a reconcile a watch event triggered, or the leader elector's next renewal, asked again at once (the
    hostile-network scenario counted 110 requests before the Retry-After the API server asked for)."""
    import ssl
    import time

    from trainjob_operator.k8s.client import Client
    from trainjob_operator.k8s.connection import Connection

    sent: list[tuple[str, float]] = []

    async def scenario() -> None:
        client = Client(Connection(server="https://k", ssl_context=ssl.create_default_context()), qps=0, burst=0)

        async def send(method: str, path: str, data: str | None, content_type: str) -> dict[str, Any]:
            sent.append((path, time.monotonic()))
            if len(sent) == 1:
                raise ApiError(503, "ServiceUnavailable", "slow down", {}, retry_after=0.4)
            return {}

        monkeypatch.setattr(client, "_send", send)  # the wire: answers scripted per request
        with pytest.raises(ApiError):
            await client.request("PATCH", "/apis/g/v1/namespaces/n/trainjobs/a/status", body={})
        started = time.monotonic()
        await client.request("PATCH", "/apis/g/v1/namespaces/n/trainjobs/b/status", body={})
        assert time.monotonic() - started < 0.2, "another object is not held back"
        await client.request("PATCH", "/apis/g/v1/namespaces/n/trainjobs/a", body={})
        await client.close()

    asyncio.run(scenario())
    (first, t0), (_, _), (third, t2) = sent
    assert first.startswith("/apis/g/v1/namespaces/n/trainjobs/a") and third.startswith(first.removesuffix("/status"))
    assert t2 - t0 >= 0.39


def test_a_request_waiting_out_a_retry_after_also_waits_out_a_longer_one_given_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: a request slept until the first Retry-After for its object and was then sent, although a request in
    flight alongside had meanwhile been told to wait longer (the full-size hostile network counted requests sooner
    than the API server asked)."""
    import ssl
    import time

    from trainjob_operator.k8s.client import Client
    from trainjob_operator.k8s.connection import Connection

    sent: dict[str, float] = {}
    path = "/apis/g/v1/namespaces/n/trainjobs/a"

    async def scenario() -> None:
        client = Client(Connection(server="https://k", ssl_context=ssl.create_default_context()), qps=0, burst=0)
        start = time.monotonic()

        async def send(method: str, url: str, data: str | None, content_type: str) -> dict[str, Any]:
            if method == "GET":  # in flight while the PATCH is refused, then told to wait longer
                await asyncio.sleep(0.1)
                raise ApiError(503, "ServiceUnavailable", "slow down", {}, retry_after=0.5)
            if method == "PATCH":
                raise ApiError(503, "ServiceUnavailable", "slow down", {}, retry_after=0.2)
            sent[method] = time.monotonic() - start
            return {}

        monkeypatch.setattr(client, "_send", send)  # the wire: answers scripted per request
        in_flight = asyncio.create_task(client.request("GET", path))
        await asyncio.sleep(0.02)
        with pytest.raises(ApiError):
            await client.request("PATCH", path, body={})
        await client.request("DELETE", path)
        with pytest.raises(ApiError):
            await in_flight
        await client.close()

    asyncio.run(scenario())
    assert sent["DELETE"] >= 0.59, sent


def test_a_429_with_retry_after_is_sent_again_once_that_time_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    """API Priority and Fairness refused: the client waits as long as the server asked, then the same request goes
    again (a 503 goes back to the caller, above)."""
    import ssl
    import time

    from trainjob_operator.k8s.client import Client
    from trainjob_operator.k8s.connection import Connection

    sent: list[tuple[str, float]] = []

    async def scenario() -> dict[str, Any]:
        client = Client(Connection(server="https://k", ssl_context=ssl.create_default_context()), qps=0, burst=0)

        async def send(method: str, path: str, data: str | None, content_type: str) -> dict[str, Any]:
            sent.append((path, time.monotonic()))
            if len(sent) == 1:
                raise ApiError(429, "TooManyRequests", "slow down", {}, retry_after=0.4)
            return {"ok": True}

        monkeypatch.setattr(client, "_send", send)  # the wire: answers scripted per request
        try:
            return await client.request("PATCH", "/apis/g/v1/namespaces/n/trainjobs/a/status", body={})
        finally:
            await client.close()

    assert asyncio.run(scenario()) == {"ok": True}
    (first, t0), (again, t1) = sent
    assert first == again
    assert t1 - t0 >= 0.39
