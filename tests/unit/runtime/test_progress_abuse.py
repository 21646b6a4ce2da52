"""The status server stays cheap under abuse (`runtime/progress.py`, issue 33): the local pre-filter of a token,
the TokenReview budget and the two caches, as tables."""

import base64
import json
from typing import Any

import pytest

from trainjob_operator.runtime import progress

AUD = progress.token_audience("team", "llm")
NOW = 1_800_000_000.0


def segment(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def jwt(claims: dict[str, Any], header: dict[str, Any] | None = None, signature: str = "c2lnbmF0dXJl") -> str:
    return f"{segment(header if header is not None else {'alg': 'RS256', 'kid': 'k'})}.{segment(claims)}.{signature}"


GOOD = {"aud": [AUD], "exp": NOW + 3600, "nbf": NOW - 10, "sub": "system:serviceaccount:team:default"}

PREFILTER = [
    pytest.param(jwt(GOOD), None, id="a projected token for this TrainJob, not expired: goes to the TokenReview"),
    pytest.param(jwt({**GOOD, "aud": AUD}), None, id="an audience as a single string is read too"),
    pytest.param(jwt({**GOOD, "exp": NOW - 30}), None, id="expired within the API server's clock leeway: its decision"),
    pytest.param("x" * 9000, "longer than 8192 bytes", id="an oversized token"),
    pytest.param("garbage", "not a JWT", id="an opaque string"),
    pytest.param("a.b", "not a JWT", id="two segments"),
    pytest.param("a.b.c.d", "not a JWT", id="four segments"),
    pytest.param(jwt(GOOD).replace(".", ".%", 1), "not a JWT", id="a character outside base64url"),
    pytest.param("e30.e30.", "not a JWT", id="an empty signature"),
    pytest.param(jwt(GOOD, header={"typ": "JWT"}), "no signed JWT header", id="a header without alg"),
    pytest.param(jwt(GOOD, header={"alg": "none"}), "no signed JWT header", id="alg none"),
    pytest.param("bm90IGpzb24." + segment(GOOD) + ".c2ln", "no signed JWT header", id="a header that is not JSON"),
    pytest.param(jwt(GOOD).split(".")[0] + ".bm90IGpzb24.c2ln", "no JSON claims", id="claims that are not JSON"),
    pytest.param(jwt(GOOD).split(".")[0] + "." + segment([1]) + ".c2ln", "no JSON claims", id="claims not an object"),
    pytest.param(jwt({**GOOD, "aud": ["https://kubernetes.default.svc"]}), "audience", id="the API server's audience"),
    pytest.param(
        jwt({**GOOD, "aud": [progress.token_audience("team", "other")]}),
        "audience",
        id="another TrainJob's audience (a pod of one TrainJob writing another's progress)",
    ),
    pytest.param(jwt({k: v for k, v in GOOD.items() if k != "aud"}), "audience", id="no audience (a legacy token)"),
    pytest.param(jwt({k: v for k, v in GOOD.items() if k != "exp"}), "no expiry", id="no expiry"),
    pytest.param(jwt({**GOOD, "exp": "tomorrow"}), "no expiry", id="an expiry that is not a number"),
    pytest.param(jwt({**GOOD, "exp": True}), "no expiry", id="an expiry that is a boolean"),
    pytest.param(jwt({**GOOD, "exp": NOW - 61}), "expired", id="expired beyond the leeway (a replayed old token)"),
    pytest.param(jwt({**GOOD, "nbf": NOW + 120}), "not valid yet", id="not valid before two minutes from now"),
]


@pytest.mark.parametrize(("token", "why"), PREFILTER)
def test_the_prefilter_refuses_what_no_tokenreview_could_pass(token: str, why: str | None) -> None:
    got = progress.prefilter(token, AUD, NOW)
    assert got == why if why is None else (got is not None and why in got)


def test_the_prefilter_survives_hostile_claims() -> None:
    deep = "[" * 5000 + "]" * 5000
    token = jwt(GOOD).split(".")[0] + "." + base64.urlsafe_b64encode(deep.encode()).decode().rstrip("=") + ".c2ln"
    assert progress.prefilter(token[:8192], AUD, NOW) is not None


def budget(**kw: Any) -> progress.ReviewBudget:
    values = {"qps": 10.0, "burst": 4, "in_flight": 2, "client_qps": 1.0, "client_burst": 2, **kw}
    return progress.ReviewBudget(**values)


@pytest.mark.parametrize(
    ("calls", "want"),
    [
        pytest.param(
            [("a", 0.0, 0), ("a", 0.0, 0), ("a", 0.0, 0)],
            [None, None, "for a"],
            id="one caller gets its burst, then waits for its own refill",
        ),
        pytest.param(
            [("a", 0.0, 0), ("a", 0.0, 0), ("a", 0.0, 0), ("b", 0.0, 0)],
            [None, None, "for a", None],
            id="a noisy caller does not spend another caller's share",
        ),
        pytest.param(
            [("a", 0.0, 0), ("b", 0.0, 0), ("c", 0.0, 0), ("d", 0.0, 0), ("e", 0.0, 0)],
            [None, None, None, None, "per second"],
            id="over all callers: the burst, then the overall rate",
        ),
        pytest.param(
            [("a", 0.0, 0), ("b", 0.0, 0), ("c", 0.0, 0), ("d", 0.0, 0), ("e", 0.1, 0)],
            [None, None, None, None, None],
            id="the overall bucket refills at qps",
        ),
        pytest.param([("a", 0.0, 2)], ["in flight"], id="no more than in_flight at once"),
        pytest.param(
            [("a", 0.0, 0), ("a", 0.0, 0), ("a", 0.0, 0), ("a", 1.0, 0)],
            [None, None, "for a", None],
            id="a caller's share refills at client_qps",
        ),
    ],
)
def test_the_tokenreview_budget(calls: list[tuple[str, float, int]], want: list[str | None]) -> None:
    b = budget()
    got = [b.admit(client, now, in_flight) for client, now, in_flight in calls]
    assert [g if g is None else next((w for w in want if w and w in g), g) for g in got] == want


def test_a_refused_caller_spends_nothing_of_the_overall_budget() -> None:
    b = budget(burst=3, client_burst=1)
    assert b.admit("noisy", 0.0, 0) is None
    assert [b.admit("noisy", 0.0, 0) for _ in range(100)] == [b.admit("noisy", 0.0, 0)] * 100
    assert [b.admit(c, 0.0, 0) for c in ("x", "y")] == [None, None], "the overall burst left is intact"


def test_the_client_table_of_the_budget_stays_bounded() -> None:
    b = budget(max_clients=100, qps=1e9, burst=10**9)
    for i in range(10_000):
        b.admit(f"10.0.{i // 256}.{i % 256}", float(i) * 0.001, 0)
    assert b.clients is not None and len(b.clients.buckets) <= 100


@pytest.mark.parametrize(
    ("steps", "want"),
    [
        pytest.param([("put", "g", True, 10.0), ("get", "g", 5.0)], [True], id="a grant is reused until it expires"),
        pytest.param([("put", "g", True, 10.0), ("get", "g", 10.0)], [None], id="and not after"),
        pytest.param([("put", "r", False, 10.0), ("get", "r", 1.0)], [False], id="a refusal is reused too"),
        pytest.param([("put", "x", True, 0.0), ("get", "x", 0.0)], [None], id="an entry already expired is not kept"),
        pytest.param(
            [("put", "k", False, 10.0), ("put", "k", True, 10.0), ("get", "k", 1.0)],
            [True],
            id="a later grant replaces a refusal of the same key",
        ),
    ],
)
def test_the_review_cache(steps: list[tuple[Any, ...]], want: list[bool | None]) -> None:
    cache = progress.ReviewCache(grants_size=4, refusals_size=4)
    got: list[bool | None] = []
    for step in steps:
        if step[0] == "put":
            cache.put(step[1], step[2], step[3], 0.0)
        else:
            got.append(cache.get(step[1], step[2]))
    assert got == want


def test_garbage_never_evicts_a_grant() -> None:
    """Issue 33: one LRU of 4096 for both, so 4096 refused tokens pushed out every grant and each pod's next report
    cost a TokenReview again (and then got 429 under a flood)."""
    cache = progress.ReviewCache(grants_size=4, refusals_size=4)
    cache.put("pod token", True, 100.0, 0.0)
    for i in range(50_000):
        cache.put(f"garbage {i}", False, 5.0, 0.0)
    assert cache.get("pod token", 1.0) is True
    assert len(cache.refusals) == 4 and len(cache.grants) == 1


def test_the_grant_table_is_an_lru_of_its_own_size() -> None:
    cache = progress.ReviewCache(grants_size=2, refusals_size=2)
    cache.put("a", True, 100.0, 0.0)
    cache.put("b", True, 100.0, 0.0)
    assert cache.get("a", 1.0) is True  # a is now the most recently used
    cache.put("c", True, 100.0, 0.0)
    assert [cache.get(k, 1.0) for k in ("a", "b", "c")] == [True, None, True]
