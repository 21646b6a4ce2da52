"""The status server stays cheap under abuse (issue 33), against the real API server: tens of thousands of garbage,
forged and replayed tokens from one address cost a bounded number of TokenReviews (counted by the API server
itself: `apiserver_request_total`), never evict the grant a trainer pod relies on, and that pod's progress reports still land
within their usual latency while the flood runs. Bounded in time: the flood stops after FLOOD_SECONDS."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_progress_server import Job, audience, post, runtime, token

from builders import trainjob_object
from operator_fixtures import Kube, OperatorProcess

pytestmark = pytest.mark.cluster

FLOOD_REQUESTS = 20_000
FLOOD_SECONDS = 35.0
FLOOD_CONNECTIONS = 8
PIPELINE = 64
FLOOD_FROM = "127.0.0.2"
"""Another loopback address: in a cluster each pod has its own, and the budget per caller address is what keeps one
noisy pod from spending another's TokenReviews."""


def segment(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def forged(aud: str, n: int) -> str:
    """A token of the right shape, audience and expiry, signed by nobody: only a TokenReview can tell."""
    return f"{segment({'alg': 'RS256', 'kid': 'x'})}.{segment({'aud': [aud], 'exp': 4102444800, 'n': n})}.c2ln"


def flood_tokens(aud: str, real: str) -> list[str]:
    """Garbage of every kind, replayed, and forged tokens that pass the local pre-filter (each distinct)."""
    claims = json.loads(base64.urlsafe_b64decode(real.split(".")[1] + "=="))
    expired = f"{real.split('.')[0]}.{segment({**claims, 'exp': 1_000_000_000})}.{real.split('.')[2]}"
    other_aud = f"{real.split('.')[0]}.{segment({**claims, 'aud': ['https://kubernetes.default.svc']})}.c2ln"
    tokens: list[str] = []
    for i in range(FLOOD_REQUESTS):
        kind = i % 8
        if kind == 0:
            tokens.append(f"garbage-{i}")
        elif kind == 1:
            tokens.append("A" * 8000)  # oversized (longer ones aiohttp refuses itself: its header limit)
        elif kind == 2:
            tokens.append(expired)  # the pod's own token, re-encoded as expired: replayed
        elif kind == 3:
            tokens.append(other_aud)  # replayed with another audience
        elif kind == 4:
            tokens.append(forged(aud, 0))  # one forged token replayed: one TokenReview, then its cached refusal
        elif kind == 5:
            tokens.append(real[:-4] + "AAAA")  # the real token with its signature broken: one TokenReview, cached
        else:
            tokens.append(forged(aud, i))  # distinct forged tokens: only the budget bounds them
    return tokens


def apiserver_token_reviews(kube: Kube) -> float:
    """POSTs of tokenreviews the API server counted (its own /metrics)."""
    text = kube.run("get", "--raw", "/metrics").stdout
    total = 0.0
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="tokenreviews"' in line and 'verb="POST"' in line:
            total += float(line.rpartition(" ")[2])
    return total


async def flood(url: str, ca: Path, tokens: list[str], deadline: float) -> dict[int, int]:
    """Send `tokens` over FLOOD_CONNECTIONS kept-alive TLS connections from FLOOD_FROM, PIPELINE requests written at
    once on each (cheap for this client, so the operator is what is measured); the answers by status code (0: the
    connection was closed on us)."""
    context = ssl.create_default_context(cafile=str(ca))
    host, port = url.split("/")[2].rsplit(":", 1)
    path = "/" + url.split("/", 3)[3]
    body = json.dumps({"trainerStatus": {"progressPercentage": 99, "lastUpdatedTime": "2026-11-28T10:00:00Z"}})
    answers: dict[int, int] = {}
    queue = list(reversed(tokens))

    def request(t: str) -> bytes:
        return (
            f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {t}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}"
        ).encode()

    async def connection() -> None:
        while queue and time.monotonic() < deadline:
            reader, writer = await asyncio.open_connection(
                host, int(port), ssl=context, local_addr=(FLOOD_FROM, 0), server_hostname=host
            )
            try:
                while queue and time.monotonic() < deadline:
                    batch = [queue.pop() for _ in range(min(PIPELINE, len(queue)))]
                    writer.write(b"".join(request(t) for t in batch))
                    await writer.drain()
                    for _ in batch:
                        head = await reader.readuntil(b"\r\n\r\n")
                        code = int(head.split(b" ", 2)[1])
                        answers[code] = answers.get(code, 0) + 1
                        length = next(
                            (
                                int(h.split(b":")[1])
                                for h in head.split(b"\r\n")
                                if h.lower().startswith(b"content-length:")
                            ),
                            0,
                        )
                        await reader.readexactly(length)
                        if b"connection: close" in head.lower():
                            raise ConnectionResetError("closed by the server")
            except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
                answers[0] = answers.get(0, 0) + 1
            finally:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()

    await asyncio.gather(*(connection() for _ in range(FLOOD_CONNECTIONS)))
    return answers


def test_a_token_flood_costs_a_bounded_number_of_tokenreviews(
    kube: Kube, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    kube.apply(runtime(namespace), trainjob_object(namespace, "flooded"))
    job = Job(kube, namespace, "flooded", tmp_path)
    aud = audience(namespace, "flooded")
    fresh = token(kube, namespace, aud, job.pod)  # a second token of the pod, first used during the flood

    def report(percent: int, bearer: str = job.token) -> tuple[int, float]:
        body = {"trainerStatus": {"progressPercentage": percent, "lastUpdatedTime": "2026-11-28T10:00:00Z"}}
        started = time.perf_counter()
        code, _ = post(job.url, job.ca, bearer, body)
        return code, time.perf_counter() - started

    # The usual latency: the pod's reports with its (then cached) grant, a new TLS connection each, as the SDK does.
    assert report(1)[0] == 200
    usual = []
    for i in range(5):
        code, took = report(2 + i)
        assert code == 200
        usual.append(took)
        time.sleep(0.6)  # the per-TrainJob limit (2/s) is not what this test measures

    before = apiserver_token_reviews(kube)
    tokens = flood_tokens(aud, job.token)
    result: dict[str, Any] = {}
    started = time.monotonic()

    def run_flood() -> None:
        result["answers"] = asyncio.run(flood(job.url, job.ca, tokens, started + FLOOD_SECONDS))
        result["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run_flood)
    thread.start()
    during: list[tuple[int, float]] = []
    fresh_answer = None
    try:
        while thread.is_alive() and time.monotonic() - started < FLOOD_SECONDS + 15:
            time.sleep(0.6)
            during.append(report(10 + len(during) % 80))
            if fresh_answer is None and len(during) == 5:
                fresh_answer = report(50, fresh)  # a token never seen: one TokenReview of the pod's own address
    finally:
        thread.join(timeout=FLOOD_SECONDS + 30)
    answers, seconds = result["answers"], result["seconds"]
    sent = sum(answers.values())
    reviews = apiserver_token_reviews(kube) - before

    after = report(99)
    reviews_after = apiserver_token_reviews(kube) - before
    cfg_burst, cfg_qps = 10, 2  # review_client_burst, review_client_qps (the defaults)
    bound = cfg_burst + cfg_qps * seconds + 2  # the flood's address, plus the fresh token's one and slack of one
    latencies = [took for _, took in during]
    print(
        f"\nflood: {sent} requests in {seconds:.1f} s ({sent / seconds:.0f}/s) from {FLOOD_FROM}, answers {answers}; "
        f"TokenReviews: {reviews:.0f} counted by the API server (bound {bound:.0f}); the pod's reports: usual median {statistics.median(usual) * 1000:.0f} ms (max "
        f"{max(usual) * 1000:.0f}), during the flood {len(during)} reports, median "
        f"{statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms; a fresh token during "
        f"the flood: {fresh_answer}"
    )
    assert sent >= 10_000, f"a flood of tens of thousands (only {sent} sent in {seconds:.1f} s)"
    assert reviews <= bound, (reviews, bound)  # in this cluster only the operator sends TokenReviews
    assert set(answers) <= {403, 413, 429}, answers
    assert all(code == 200 for code, _ in during), during
    assert statistics.median(latencies) <= max(5 * statistics.median(usual), 0.5), (usual, latencies)
    assert fresh_answer is not None and fresh_answer[0] == 200, fresh_answer
    assert after[0] == 200 and reviews_after == reviews, "the pod's grant was never evicted: no TokenReview after"
    trainer_status = ((kube.get("trainjob", "flooded", namespace) or {}).get("status") or {}).get("trainerStatus")
    assert trainer_status is not None and trainer_status["progressPercentage"] == 99, "no flood request wrote"
