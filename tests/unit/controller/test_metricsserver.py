"""/metrics over TLS with authentication and authorisation (`controller/metricsserver.py`, `metrics.auth.enabled`):
who gets the metrics, what each refusal costs the API server, and that the plain health port stops serving them."""

import asyncio
import datetime as dt
import ssl
from typing import Any

import aiohttp

from fake_client import FakeClient
from trainjob_operator import certs
from trainjob_operator.config import MetricsConfig
from trainjob_operator.controller.healthserver import HealthServer
from trainjob_operator.controller.metricsserver import MetricsServer
from trainjob_operator.metrics import Metrics

NOW = dt.datetime.now(dt.UTC)
BUNDLE = certs.generate(["localhost", "127.0.0.1"], NOW)
READER, STRANGER = "reader-token", "stranger-token"


class Reviews(FakeClient):
    """The API server's reviews: READER is a user allowed `get` on /metrics, STRANGER one who is not; any other
    token is not authenticated."""

    async def create(self, obj: dict[str, Any], field_manager: str | None = None) -> dict[str, Any]:
        self._record("create", obj["kind"], ("create", obj["kind"], None))
        if obj["kind"] == "TokenReview":
            user = {READER: "system:serviceaccount:monitoring:prometheus", STRANGER: "alice"}.get(obj["spec"]["token"])
            status = {"authenticated": True, "user": {"username": user, "groups": ["g"]}} if user else {}
            return {**obj, "status": status}
        assert obj["kind"] == "SubjectAccessReview"
        spec = obj["spec"]
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {**obj, "status": {"allowed": spec["user"] == "system:serviceaccount:monitoring:prometheus"}}


def _client_tls() -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=BUNDLE.ca_cert.decode())
    context.check_hostname = False
    return context


def scrape(tokens: list[str | None]) -> tuple[list[int], list[str], bool]:
    """Each token's answer (None: no Authorization header), the reviews sent, and whether the body was metrics."""
    client = Reviews()
    metrics = Metrics()

    async def scenario() -> tuple[list[int], bool]:
        server = MetricsServer(MetricsConfig(port=0), client, metrics)
        server.load(BUNDLE)
        await server.start()
        codes, exposition = [], False
        try:
            async with aiohttp.ClientSession() as session:
                for token in tokens:
                    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
                    url = f"https://127.0.0.1:{server.cfg.port}/metrics"
                    async with session.get(url, headers=headers, ssl=_client_tls()) as resp:
                        codes.append(resp.status)
                        exposition |= "trainjob_operator" in await resp.text()
        finally:
            await server.stop()
        return codes, exposition

    codes, exposition = asyncio.run(scenario())
    return codes, [call[1] for call in client.calls if call[0] == "create"], exposition


def test_an_authorised_scraper_reads_the_metrics_and_is_reviewed_once() -> None:
    codes, reviews, exposition = scrape([READER, READER, READER])
    assert codes == [200, 200, 200]
    assert reviews == ["TokenReview", "SubjectAccessReview"]  # the verdict is cached
    assert exposition


def test_no_token_an_unknown_token_and_an_unauthorised_user_are_refused() -> None:
    codes, reviews, exposition = scrape([None, "garbage", STRANGER, "bad token with spaces", "x" * 4097, "x" * 20000])
    assert codes == [401, 401, 403, 401, 401, 400]  # 400: aiohttp's own limit on a header line
    # only the two plausible tokens cost reviews; no token, spaces or an oversized one cost none
    assert reviews == ["TokenReview", "TokenReview", "SubjectAccessReview"]
    assert not exposition


def test_refusals_are_cached_apart_and_never_evict_a_grant() -> None:
    floods: list[str | None] = [f"garbage-{n}" for n in range(300)]
    codes, reviews, _ = scrape([READER, *floods, READER])
    assert (codes[0], codes[-1]) == (200, 200)
    assert reviews.count("SubjectAccessReview") == 1  # the reader was not reviewed again after the flood


def test_with_auth_the_plain_health_port_serves_no_metrics() -> None:
    async def scenario() -> tuple[int, int]:
        server = HealthServer("127.0.0.1", 0, Metrics(), lambda: (True, "ok"), serve_metrics=False)
        port = await server.start()
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{port}/metrics") as metrics,
                session.get(f"http://127.0.0.1:{port}/healthz") as health,
            ):
                return metrics.status, health.status
        finally:
            await server.stop()

    assert asyncio.run(scenario()) == (404, 200)
