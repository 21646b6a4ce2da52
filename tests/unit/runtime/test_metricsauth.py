"""Who may read /metrics with `metrics.auth.enabled` (runtime/metricsauth.py): the reviews sent and how their answers
read, as controller-runtime's authentication and authorisation filter."""

import pytest

from trainjob_operator.runtime import metricsauth
from trainjob_operator.runtime.metricsauth import Scraper


@pytest.mark.parametrize(
    ("token", "plausible"),
    [
        pytest.param("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", True, id="a JWT is worth a review"),
        pytest.param("", False, id="an empty token is not"),
        pytest.param("a b", False, id="nor one with a space"),
        pytest.param("tok\x00en", False, id="nor one with a control character"),
        pytest.param("x" * 4097, False, id="nor one over 4 KiB"),
    ],
)
def test_which_tokens_are_worth_a_review(token: str, plausible: bool) -> None:
    assert metricsauth.plausible(token) is plausible


def test_the_access_review_asks_for_get_on_the_metrics_url_as_the_authenticated_user() -> None:
    review = {
        "status": {
            "authenticated": True,
            "user": {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u1", "groups": ["a", "b"]},
        }
    }
    scraper = metricsauth.scraper_of(review)
    assert scraper == Scraper("system:serviceaccount:monitoring:prometheus", "u1", ("a", "b"))
    assert metricsauth.access_review(scraper) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "system:serviceaccount:monitoring:prometheus",
            "groups": ["a", "b"],
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            "uid": "u1",
        },
    }


@pytest.mark.parametrize(
    "review",
    [
        pytest.param({}, id="no status"),
        pytest.param({"status": {"authenticated": False, "error": "invalid"}}, id="not authenticated"),
        pytest.param({"status": {"authenticated": True, "user": {}}}, id="authenticated without a user name"),
    ],
)
def test_a_review_without_an_authenticated_user_names_no_scraper(review: dict[str, object]) -> None:
    assert metricsauth.scraper_of(review) is None


def test_the_token_review_leaves_the_audiences_to_the_api_server() -> None:
    assert metricsauth.token_review("t") == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "t"},
    }
    assert metricsauth.allowed({"status": {"allowed": True}}) and not metricsauth.allowed({"status": {}})
