"""The UI is no confused deputy (`ui/server.py` with `k8s.client.Resource.path`, issue 33): the crafted route that
made the UI GET a Secret with its user's credentials now gets a 400 or 404 and no Secret is requested; requests
without the token or cookie get 401. Run against the fake API server over real HTTP."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import ClientSession, CookieJar, web

from fake_apiserver import FakeApiServer, Kind
from operator_fixtures import free_port
from trainjob_operator.k8s import connection as k8s_config
from trainjob_operator.k8s.client import Client, Resource
from trainjob_operator.k8s.connection import Connection
from trainjob_operator.ui.server import UI

SECRETS = Kind("", "v1", "secrets", "Secret")
PODS = Kind("", "v1", "pods", "Pod")
TRAINJOBS = Kind("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
JOBSETS = Kind("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
TOKEN = "per-run-token-0123456789abcdef0123456789"
SECRET_TEXT = "hunter2-do-not-show"
CRAFTED = "x%2F..%2F..%2F..%2F..%2F..%2F..%2F..%2Fapi%2Fv1%2Fnamespaces%2Fkube-system%2Fsecrets%2Ffoo"


def test_every_name_is_one_path_segment() -> None:
    pods = Resource("v1", "pods")
    assert pods.path("ns", "a/../b") == "/api/v1/namespaces/ns/pods/a%2F..%2Fb"
    assert pods.path("a/b", "c", "log") == "/api/v1/namespaces/a%2Fb/pods/c/log"
    assert Resource("trainer.kubeflow.org/v1alpha1", "trainjobs").path("ns", "llm") == (
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/llm"
    )


Body = Callable[[ClientSession, str, FakeApiServer], Awaitable[Any]]


async def with_ui(body: Body) -> Any:
    async with FakeApiServer([SECRETS, PODS, TRAINJOBS, JOBSETS]) as fake:
        fake.add(SECRETS, {"metadata": {"name": "foo", "namespace": "kube-system"}, "data": {"x": SECRET_TEXT}})
        fake.add(TRAINJOBS, {"metadata": {"name": "x", "namespace": "default", "uid": "u1"}, "spec": {}})
        connection = Connection(server=fake.url, ssl_context=k8s_config.ssl_context(None, None, None, None, False))
        async with Client(connection, qps=0, burst=0) as client:
            port = free_port()
            hosts = [f"127.0.0.1:{port}"]
            ui = UI(client, allowed_hosts=hosts, token=TOKEN)
            runner = web.AppRunner(ui.app(), access_log=None, shutdown_timeout=0.5)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            await ui.start()
            try:
                async with ClientSession(cookie_jar=CookieJar(unsafe=True)) as session:  # cookies of an IP too
                    return await body(session, f"http://127.0.0.1:{port}", fake)
            finally:
                fake.end_streams()
                await ui.stop()
                await runner.cleanup()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    "route",
    [
        pytest.param(f"/api/trainjobs/default/{CRAFTED}", id="the detail route of issue 33"),
        pytest.param(f"/api/trainjobs/default/{CRAFTED}/stream", id="the detail stream"),
        pytest.param(f"/api/pods/default/{CRAFTED}/log", id="a pod's log"),
        pytest.param(f"/api/pods/{CRAFTED}/p/log", id="through the namespace"),
        pytest.param("/api/pods/default/p/log?container=..%2F..%2Fsecrets", id="through the container parameter"),
        pytest.param("/api/trainjobs/default/..", id="a parent segment as the name"),
    ],
)
def test_a_crafted_route_never_reaches_a_secret(route: str) -> None:
    async def body(session: ClientSession, base: str, fake: FakeApiServer) -> tuple[int, str, list[str]]:
        async with session.get(base + route, headers=AUTH) as answer:
            text = await answer.text()
        return answer.status, text, [seen.path for seen in fake.seen]

    status, text, paths = asyncio.run(with_ui(body))
    assert status in (400, 404), (status, text)
    assert SECRET_TEXT not in text
    assert not [p for p in paths if "secrets" in p], paths


def test_a_bad_route_name_is_a_clear_400() -> None:
    async def body(session: ClientSession, base: str, fake: FakeApiServer) -> tuple[int, Any]:
        async with session.get(base + "/api/trainjobs/Default/x", headers=AUTH) as answer:
            return answer.status, await answer.json()

    status, answer = asyncio.run(with_ui(body))
    assert status == 400
    assert answer["message"].startswith("namespace: 'Default' is not a namespace: a DNS-1123 label")


def test_the_token_is_exchanged_for_a_strict_httponly_cookie() -> None:
    async def body(session: ClientSession, base: str, fake: FakeApiServer) -> list[Any]:
        seen: list[Any] = []
        async with session.get(base + "/api/trainjobs") as answer:
            seen.append(answer.status)
        async with session.get(base + "/?token=wrong", allow_redirects=False) as answer:
            seen.append(answer.status)
        async with session.get(base + f"/?token={TOKEN}", allow_redirects=False) as answer:
            seen += [answer.status, answer.headers["Location"], answer.headers["Set-Cookie"]]
        async with session.get(base + "/api/trainjobs") as answer:  # the session now carries the cookie
            seen.append(answer.status)
        return seen

    before, wrong, redirect, location, cookie, after = asyncio.run(with_ui(body))
    assert (before, wrong, redirect, location, after) == (401, 401, 303, "/", 200)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie and TOKEN not in cookie
