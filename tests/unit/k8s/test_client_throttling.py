"""The client leaves the pace to the API server: a 429 with Retry-After pauses every request to that resource for as
long as asked, then the request goes again; long waits and repeated refusals go back to the caller."""

import asyncio
import time
from typing import Any

import pytest

from fake_apiserver import FakeApiServer, Kind
from trainjob_operator import config as config_module
from trainjob_operator.k8s import connection as k8s_config
from trainjob_operator.k8s.client import THROTTLE_RETRIES, ApiError, Client, RateLimiter
from trainjob_operator.k8s.connection import Connection

CONFIGMAPS = Kind("", "v1", "configmaps", "ConfigMap")


async def serve(answers: list[tuple[int, str | None]], body: Any) -> Any:
    """The fake API server answering each request with the next (status, Retry-After) of `answers`, then serving
    ConfigMap ns/x; returns what `body(client)` returns and the arrival times."""
    async with FakeApiServer([CONFIGMAPS]) as fake:
        fake.add(CONFIGMAPS, {"metadata": {"name": "x", "namespace": "ns"}})
        for code, retry in answers:
            fake.answer(lambda _: True, code, retry_after=retry, message="slow down")
        connection = Connection(server=fake.url, ssl_context=k8s_config.ssl_context(None, None, None, None, False))
        async with Client(connection, qps=0, burst=0) as client:
            return await body(client), [seen.at for seen in fake.seen]


def test_a_429_is_waited_out_and_sent_again() -> None:
    async def body(client: Client) -> Any:
        return await client.get("v1", "ConfigMap", "x", "ns")

    got, seen = asyncio.run(serve([(429, "0.2"), (429, None)], body))
    assert got == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "ns", "resourceVersion": "101"},
    }
    assert len(seen) == 3
    assert seen[1] - seen[0] >= 0.18, "Retry-After: 0.2 was honoured"
    assert seen[2] - seen[1] >= 0.9, "no Retry-After: one second"


@pytest.mark.parametrize(
    ("answers", "why"),
    [
        pytest.param(
            [(429, "60")],
            "a Retry-After longer than the client waits goes to the caller (the work queue)",
            id="long Retry-After",
        ),
        pytest.param([(429, "0")] * (THROTTLE_RETRIES + 1), "refused every time", id="refused every time"),
        pytest.param([(500, "0")], "only 429 is retried here", id="a 500"),
    ],
)
def test_what_goes_back_to_the_caller(answers: list[tuple[int, str | None]], why: str) -> None:
    async def body(client: Client) -> Any:
        with pytest.raises(ApiError) as caught:
            await client.get("v1", "ConfigMap", "x", "ns")
        return caught.value

    err, seen = asyncio.run(serve(list(answers), body))
    assert err.status == answers[0][0], why
    assert len(seen) == len(answers), why


def test_a_hold_delays_every_caller_of_the_resource() -> None:
    async def scenario() -> list[float]:
        limiter = RateLimiter(qps=0, burst=0)
        limiter.hold(0.2)
        start = time.monotonic()

        async def one() -> float:
            await limiter.acquire()
            return time.monotonic() - start

        return list(await asyncio.gather(one(), one(), one()))

    assert all(waited >= 0.18 for waited in asyncio.run(scenario()))


def test_the_default_client_limit_is_a_ceiling_not_the_pace() -> None:
    client = config_module.OperatorConfig().client
    assert (client.qps, client.burst) == (1000, 2000)


@pytest.mark.parametrize(
    ("env", "proxy_url", "want"),
    [
        pytest.param({}, None, None, id="no proxy anywhere"),
        pytest.param({"HTTPS_PROXY": "http://p:3128"}, None, "http://p:3128", id="the environment's"),
        pytest.param({"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "api.example"}, None, None, id="NO_PROXY names it"),
        pytest.param({"HTTPS_PROXY": "http://p:3128"}, "http://k:8080", "http://k:8080", id="the kubeconfig's wins"),
    ],
)
def test_the_proxy_is_resolved_once_as_kubectl_resolves_it(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], proxy_url: str | None, want: str | None
) -> None:
    from trainjob_operator.k8s.client import env_proxy

    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert env_proxy("https://api.example:6443", proxy_url)[0] == want
