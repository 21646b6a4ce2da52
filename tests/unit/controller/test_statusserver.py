"""The status server (`controller/statusserver.py`): the URL trainer pods get."""

import asyncio
import base64
import datetime as dt
import json
import ssl
import time
from typing import Any

import aiohttp
import pytest

from fake_client import FakeClient
from operator_fixtures import free_port
from trainjob_operator import certs
from trainjob_operator import config as config_module
from trainjob_operator.controller.statusserver import StatusServer
from trainjob_operator.controller.store import Store
from trainjob_operator.metrics import Metrics


@pytest.mark.parametrize(
    ("status_server", "webhook_service", "webhook_url_host", "want"),
    [
        pytest.param({}, None, None, "https://127.0.0.1:10443", id="out of a cluster: the listening host and port"),
        pytest.param(
            {"url_port": 7443},
            None,
            "10.0.0.5",
            "https://10.0.0.5:7443",
            id="replicas behind one local load balancer: every one writes the balancer's port",
        ),
        pytest.param(
            {"url_host": "st.local", "port": 9000},
            None,
            "10.0.0.5",
            "https://st.local:9000",
            id="its own url_host wins over the webhook's",
        ),
        pytest.param(
            {"url_port": 7443},
            "svc",
            None,
            "https://svc.ops.svc:10443",
            id="in a cluster: the Service and the served port, url_port ignored",
        ),
    ],
)
def test_the_status_server_url_trainer_pods_get(
    status_server: dict[str, Any], webhook_service: str | None, webhook_url_host: str | None, want: str
) -> None:
    from trainjob_operator.controller.statusserver import base_url

    cfg = config_module.StatusServerConfig.model_validate(status_server)
    assert base_url(cfg, webhook_service, webhook_url_host, "ops") == want


# --- cheap under abuse (issue 33), against the real server on 127.0.0.1 ---------------------------------------------

AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/llm/status"
ROUTE = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/llm/status"


def _jwt(claims: dict[str, Any]) -> str:
    def seg(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{seg({'alg': 'RS256'})}.{seg(claims)}.c2lnbmF0dXJl"


class RefusingReviews(FakeClient):
    """A FakeClient whose TokenReviews refuse every token."""

    async def create(self, obj: dict[str, Any], field_manager: str | None = None) -> dict[str, Any]:
        if obj["kind"] != "TokenReview":
            return await super().create(obj, field_manager)
        return {**obj, "status": {"authenticated": False}}


async def _serve(**cfg: Any) -> tuple[StatusServer, int, ssl.SSLContext]:
    port = free_port()
    bundle = certs.generate(["127.0.0.1"], dt.datetime.now(dt.UTC))
    server = StatusServer(config_module.StatusServerConfig(port=port, **cfg), RefusingReviews(), Store(), Metrics())
    server.load(bundle)
    await server.start()
    context = ssl.create_default_context(cadata=bundle.ca_cert.decode())
    return server, port, context


def test_garbage_tokens_cost_no_tokenreview_and_forged_ones_a_bounded_number() -> None:
    async def run() -> tuple[list[int], list[int], int]:
        server, port, context = await _serve(review_client_burst=5, review_client_qps=1, review_burst=100)
        url = f"https://127.0.0.1:{port}{ROUTE}"
        try:
            async with aiohttp.ClientSession() as session:

                async def post(token: str) -> int:
                    headers = {"Authorization": f"Bearer {token}"}
                    async with session.post(url, data=b"{}", headers=headers, ssl=context) as answer:
                        return answer.status

                garbage = ["x" * (i % 50 + 1) for i in range(300)] + [_jwt({"aud": ["other"], "exp": 4e9})] * 100
                garbage_answers = [await post(token) for token in garbage]
                assert server.token_reviews == 0
                started = time.monotonic()
                forged = [await post(_jwt({"aud": [AUDIENCE], "exp": 4e9, "n": i})) for i in range(200)]
                bound = 5 + int(time.monotonic() - started) + 1
                assert server.token_reviews <= bound, (server.token_reviews, bound)
                return garbage_answers, forged, server.token_reviews
        finally:
            await server.stop()

    garbage, forged, reviews = asyncio.run(run())
    assert set(garbage) == {403}
    assert set(forged) == {403, 429} and forged.count(403) == reviews


def test_a_slow_body_gets_408_within_the_deadline() -> None:
    async def run() -> tuple[str, float]:
        server, port, context = await _serve(body_timeout_seconds=0.5)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
            token = _jwt({"aud": [AUDIENCE], "exp": 4e9})
            writer.write(
                f"POST {ROUTE} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                "Content-Length: 100\r\n\r\n{".encode()
            )
            await writer.drain()
            started = time.monotonic()
            line = await asyncio.wait_for(reader.readline(), 10)
            writer.close()
            await asyncio.wait_for(writer.wait_closed(), 5)
            return line.decode().strip(), time.monotonic() - started
        finally:
            await server.stop()

    line, took = asyncio.run(run())
    assert line == "HTTP/1.1 408 Request Timeout" and took < 5
