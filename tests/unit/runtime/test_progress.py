"""The TrainJob status server's pure decisions (runtime.progress) and the TrainJobStatus plugin's injection."""

import base64
import json
from dataclasses import dataclass
from typing import Any

import pytest

from builders import RuntimeBuilder, TrainJobBuilder, by_kind, container_of, jobset_of, pod_spec
from trainjob_operator.api import constants as c
from trainjob_operator.runtime import progress
from trainjob_operator.runtime.errors import BuildError
from trainjob_operator.runtime.observed import Observed, StatusEndpoint
from trainjob_operator.runtime.pipeline import Framework

FRAMEWORK = Framework.from_registry()
AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/llm/status"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_route_and_audience_are_upstreams() -> None:
    assert (
        progress.status_path("team", "llm")
        == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/llm/status"
    )
    assert progress.token_audience("team", "llm") == AUDIENCE


@pytest.mark.parametrize(
    ("path", "want"),
    [
        pytest.param(
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/llm/status",
            ("team", "llm"),
            id="the status route names namespace and TrainJob",
        ),
        pytest.param(
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/llm",
            None,
            id="the TrainJob itself is no route",
        ),
        pytest.param(
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/llm/status/x",
            None,
            id="nothing below status",
        ),
        pytest.param(
            "/apis/trainer.kubeflow.org/v1beta1/namespaces/team/trainjobs/llm/status",
            None,
            id="another version is no route",
        ),
        pytest.param(
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces//trainjobs/llm/status",
            None,
            id="an empty namespace is no route",
        ),
        pytest.param("/healthz", None, id="any other path is no route"),
    ],
)
def test_parse_path(path: str, want: tuple[str, str] | None) -> None:
    assert progress.parse_path(path) == want


@pytest.mark.parametrize(
    ("header", "want"),
    [
        pytest.param("Bearer abc", "abc", id="a bearer token"),
        pytest.param("bearer abc", "abc", id="the scheme is case-insensitive"),
        pytest.param("Basic abc", None, id="another scheme is no token"),
        pytest.param("Bearer", None, id="a scheme without token is none"),
        pytest.param("Bearer a b", None, id="two tokens are none"),
        pytest.param(None, None, id="no header is none"),
    ],
)
def test_bearer_token(header: str | None, want: str | None) -> None:
    assert progress.bearer_token(header) == want


def test_answers_are_metav1_status() -> None:
    assert (
        progress.Answer(
            403,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Forbidden",
                "reason": "Forbidden",
                "code": 403,
            },
        )
        == progress.FORBIDDEN
    )
    assert [
        (a.code, a.body["reason"], a.body["message"])
        for a in (
            progress.INVALID_PAYLOAD,
            progress.TRAINJOB_NOT_FOUND,
            progress.INTERNAL_ERROR,
            progress.NOT_FOUND,
            progress.TOO_LARGE,
            progress.TOO_MANY_REQUESTS,
            progress.invalid("x: Invalid value"),
        )
    ] == [
        (422, "Invalid", "Invalid payload"),
        (404, "NotFound", "Train job not found"),
        (500, "InternalError", "Internal error"),
        (404, "NotFound", "Not found"),
        (413, "RequestEntityTooLarge", "Payload too large"),
        (429, "TooManyRequests", "Too many requests"),
        (422, "Invalid", "x: Invalid value"),
    ]


SDK_BODY = {
    "trainerStatus": {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.25"}],
        "lastUpdatedTime": "2026-11-23T10:00:00Z",
    }
}


@pytest.mark.parametrize(
    ("body", "want"),
    [
        pytest.param(SDK_BODY, SDK_BODY["trainerStatus"], id="what the SDK sends passes through"),
        pytest.param(
            {"trainerStatus": {**SDK_BODY["trainerStatus"], "extra": 1}, "other": True},
            SDK_BODY["trainerStatus"],
            id="unknown fields are ignored, as Go's decoder",
        ),
        pytest.param({}, None, id="no trainerStatus: nothing to write"),
        pytest.param({"trainerStatus": None}, None, id="a null trainerStatus: nothing to write"),
        pytest.param(
            {"trainerStatus": {"progressPercentage": None, "lastUpdatedTime": "2026-11-23T10:00:00Z"}},
            {"lastUpdatedTime": "2026-11-23T10:00:00Z"},
            id="null fields are left out",
        ),
        pytest.param(
            {"trainerStatus": {"progressPercentage": 150}},
            {"progressPercentage": 150},
            id="bounds and the required time are the API server's to check",
        ),
        pytest.param(
            {"trainerStatus": {"lastUpdatedTime": "2026-11-23T11:00:00.123456+01:00"}},
            {"lastUpdatedTime": "2026-11-23T10:00:00Z"},
            id="the SDK's isoformat() time is written as metav1.Time writes it",
        ),
    ],
)
def test_parse_update(body: dict[str, Any], want: dict[str, Any] | None) -> None:
    assert progress.parse_update(json.dumps(body).encode()) == want


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(b"{", "not JSON", id="not JSON"),
        pytest.param(b"[]", "must be a JSON object", id="not an object"),
        pytest.param(b'{"trainerStatus": 1}', "trainerStatus: must be an object", id="trainerStatus not an object"),
        pytest.param(
            b'{"trainerStatus": {"progressPercentage": "42"}}',
            "progressPercentage: must be an integer",
            id="a percentage as a string",
        ),
        pytest.param(
            b'{"trainerStatus": {"progressPercentage": 4.5}}',
            "progressPercentage: must be an integer",
            id="a fractional percentage",
        ),
        pytest.param(
            b'{"trainerStatus": {"progressPercentage": true}}',
            "progressPercentage: must be an integer",
            id="a boolean percentage",
        ),
        pytest.param(
            b'{"trainerStatus": {"estimatedRemainingSeconds": 4294967296}}',
            "out of the int32 range",
            id="remaining seconds beyond int32",
        ),
        pytest.param(b'{"trainerStatus": {"metrics": {"loss": 1}}}', "metrics: must be a list", id="metrics as a map"),
        pytest.param(
            b'{"trainerStatus": {"metrics": [{"name": "loss", "value": 0.5}]}}',
            "metrics[0].value: must be a string",
            id="a numeric metric value",
        ),
        pytest.param(b"\xff", "not JSON", id="not UTF-8"),
        pytest.param(
            b'{"trainerStatus": {"lastUpdatedTime": "yesterday"}}', "not an RFC 3339 time", id="a time that is no time"
        ),
        pytest.param(
            b'{"trainerStatus": {"lastUpdatedTime": "2026-11-23T10:00:00"}}', "no offset", id="a time without offset"
        ),
    ],
)
def test_parse_update_refuses(raw: bytes, message: str) -> None:
    with pytest.raises(progress.PayloadError, match=message.replace("[", r"\[").replace("]", r"\]")):
        progress.parse_update(raw)


def test_status_apply_owns_only_trainer_status() -> None:
    assert progress.status_apply("team", "llm", {"progressPercentage": 1}) == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llm", "namespace": "team"},
        "status": {"trainerStatus": {"progressPercentage": 1}},
    }


def test_token_review_and_caller() -> None:
    assert progress.token_review("tok", AUDIENCE) == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "tok", "audiences": [AUDIENCE]},
    }
    review = {
        "status": {
            "authenticated": True,
            "audiences": [AUDIENCE],
            "user": {
                "username": "system:serviceaccount:team:default",
                "uid": "u",
                "extra": {progress.EXTRA_POD_NAME: ["llm-node-0-0-abc"], progress.EXTRA_POD_UID: ["pod-uid"]},
            },
        }
    }
    assert progress.caller_of(review) == progress.Caller(
        True, "system:serviceaccount:team:default", (AUDIENCE,), "llm-node-0-0-abc", "pod-uid"
    )
    assert progress.caller_of({"status": {"authenticated": False, "error": "bad"}}) == progress.Caller(False)


# --- authorize -----------------------------------------------------------------------------------------------

CALLER = progress.Caller(True, "system:serviceaccount:team:trainer", (AUDIENCE,), "llm-node-0-0-abc", "pod-uid")
POD = {
    "metadata": {
        "name": "llm-node-0-0-abc",
        "namespace": "team",
        "uid": "pod-uid",
        "labels": {c.JOBSET_NAME_LABEL: "llm", c.JOBSET_UID_LABEL: "jobset-uid"},
    },
    "spec": {"serviceAccountName": "trainer"},
}
JOBSET = {
    "metadata": {
        "name": "llm",
        "namespace": "team",
        "uid": "jobset-uid",
        "ownerReferences": [
            {"apiVersion": c.API_VERSION, "kind": "TrainJob", "name": "llm", "uid": "tj-uid", "controller": True}
        ],
    }
}


def edited(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    clone: dict[str, Any] = json.loads(json.dumps(obj))
    node = clone
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return clone


@dataclass(frozen=True)
class AuthCase:
    caller: progress.Caller = CALLER
    pod: dict[str, Any] | None = None
    jobset: dict[str, Any] | None = None
    trainjob_uid: str | None = "tj-uid"
    name: str = "llm"
    why: str = "ok"


def replace_caller(**fields: Any) -> progress.Caller:
    return progress.Caller(**{**CALLER.__dict__, **fields})


AUTH_CASES = [
    pytest.param(AuthCase(pod=POD, jobset=JOBSET), id="a token bound to a pod of the TrainJob's JobSet may write"),
    pytest.param(
        AuthCase(caller=progress.Caller(False), why="did not authenticate"), id="a forged or expired token is refused"
    ),
    pytest.param(
        AuthCase(
            caller=replace_caller(audiences=("api",)), pod=POD, jobset=JOBSET, why="not for this TrainJob's audience"
        ),
        id="a token for another audience is refused",
    ),
    pytest.param(
        AuthCase(
            caller=replace_caller(username="system:serviceaccount:other:trainer"),
            pod=POD,
            jobset=JOBSET,
            why="is not a ServiceAccount of team",
        ),
        id="a ServiceAccount of another namespace is refused",
    ),
    pytest.param(
        AuthCase(caller=replace_caller(username="alice"), pod=POD, jobset=JOBSET, why="is not a ServiceAccount"),
        id="a user that is no ServiceAccount is refused",
    ),
    pytest.param(
        AuthCase(caller=replace_caller(pod_name=None, pod_uid=None), pod=POD, jobset=JOBSET, why="not bound to a pod"),
        id="a token not bound to a pod is refused",
    ),
    pytest.param(AuthCase(jobset=JOBSET, why="does not exist"), id="a token of a deleted pod is refused"),
    pytest.param(
        AuthCase(pod=edited(POD, "metadata.uid", "new"), jobset=JOBSET, why="was replaced"),
        id="a token of an earlier pod of the same name is refused",
    ),
    pytest.param(
        AuthCase(pod=edited(POD, "spec.serviceAccountName", "default"), jobset=JOBSET, why="not its pod's"),
        id="a token of another ServiceAccount than its pod's is refused",
    ),
    pytest.param(
        AuthCase(
            pod=edited(POD, "metadata.labels", {c.JOBSET_NAME_LABEL: "other", c.JOBSET_UID_LABEL: "jobset-uid"}),
            jobset=JOBSET,
            why="not a pod of this TrainJob",
        ),
        id="a pod of another TrainJob is refused",
    ),
    pytest.param(
        AuthCase(
            pod=edited(POD, "metadata.labels", {c.JOBSET_NAME_LABEL: "llm"}),
            jobset=JOBSET,
            why="not a pod of this TrainJob",
        ),
        id="a pod only labelled like the JobSet's is refused",
    ),
    pytest.param(AuthCase(pod=POD, why="has no JobSet"), id="a TrainJob without JobSet takes no update"),
    pytest.param(
        AuthCase(pod=POD, jobset=JOBSET, trainjob_uid="recreated", why="not controlled by this TrainJob"),
        id="a JobSet left from a deleted TrainJob of the same name is refused",
    ),
]


@pytest.mark.parametrize("case", AUTH_CASES)
def test_authorize(case: AuthCase) -> None:
    verdict = progress.authorize(case.caller, "team", case.name, case.pod, case.jobset, case.trainjob_uid)
    assert verdict.allowed == (case.why == "ok")
    assert case.why in verdict.why


def jwt(claims: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{body}.c2ln"


@pytest.mark.parametrize(
    ("token", "want"),
    [
        pytest.param(jwt({"exp": 1700000000, "aud": ["x"]}), 1700000000.0, id="the exp claim of a JWT"),
        pytest.param(jwt({"aud": ["x"]}), None, id="no exp claim"),
        pytest.param(jwt({"exp": "soon"}), None, id="a non-numeric exp"),
        pytest.param("opaque", None, id="not a JWT"),
        pytest.param("a.%%%.c", None, id="a JWT whose claims do not decode"),
    ],
)
def test_token_expiry(token: str, want: float | None) -> None:
    assert progress.token_expiry(token) == want


def test_rate_limit_is_per_trainjob_and_refills() -> None:
    limits = progress.RateLimits(qps=1, burst=2)
    a, b = ("team", "a"), ("team", "b")
    assert [limits.allow(a, 0.0) for _ in range(3)] == [True, True, False]
    assert limits.allow(b, 0.0), "another TrainJob has its own budget"
    assert not limits.allow(a, 0.5), "half a token is no token"
    assert limits.allow(a, 1.5)
    assert progress.RateLimits(qps=0, burst=1).allow(a, 0.0), "qps 0 means no limit"


def test_rate_limit_table_stays_bounded() -> None:
    limits = progress.RateLimits(qps=1, burst=1, max_keys=3)
    for i in range(10):
        limits.allow(("team", str(i)), float(i * 10))
    assert len(limits.buckets) <= 3


# --- the TrainJobStatus plugin ---------------------------------------------------------------------------------

RUNTIME = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}).node_container(env=[{"name": "KEEP", "value": "1"}])
JOB = TrainJobBuilder.make(name="llm", namespace="team")
SERVER = StatusEndpoint("https://trainjob-operator.kubeflow-system.svc:10443", CA)


def test_trainer_pods_get_upstreams_env_token_volume_and_ca() -> None:
    objects = FRAMEWORK.desired_objects(JOB.obj(), RUNTIME.source(), Observed(status_server=SERVER))
    jobset = jobset_of(objects)
    node = container_of(jobset, c.NODE)
    status_env = [e for e in node["env"] if e["name"].startswith("KUBEFLOW_TRAINER_")]
    assert status_env == [
        {
            "name": "KUBEFLOW_TRAINER_SERVER_URL",
            "value": "https://trainjob-operator.kubeflow-system.svc:10443"
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team"
            "/trainjobs/llm/status",
        },
        {"name": "KUBEFLOW_TRAINER_SERVER_CA_CERT", "value": "/var/run/secrets/kubeflow/trainer/ca.crt"},
        {"name": "KUBEFLOW_TRAINER_SERVER_TOKEN", "value": "/var/run/secrets/kubeflow/trainer/token"},
    ]
    assert {"name": "KEEP", "value": "1"} in node["env"]
    assert {
        "name": "kubeflow-trainer-token",
        "mountPath": "/var/run/secrets/kubeflow/trainer",
        "readOnly": True,
    } in node["volumeMounts"]
    volume = next(v for v in pod_spec(jobset, c.NODE)["volumes"] if v["name"] == "kubeflow-trainer-token")
    assert volume == {
        "name": "kubeflow-trainer-token",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"audience": AUDIENCE, "expirationSeconds": 3600, "path": "token"}},
                {"configMap": {"name": "llm-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            ]
        },
    }
    for initializer in (c.DATASET_INITIALIZER, c.MODEL_INITIALIZER):
        assert not any(v["name"] == "kubeflow-trainer-token" for v in pod_spec(jobset, initializer)["volumes"]), (
            "only trainer pods report progress"
        )
    configmaps = [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"] == "llm-tls-config"]
    assert configmaps == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "llm-tls-config",
                "namespace": "team",
                "ownerReferences": [
                    {
                        "apiVersion": c.API_VERSION,
                        "kind": "TrainJob",
                        "name": "llm",
                        "controller": True,
                        "blockOwnerDeletion": True,
                        "uid": "uid",
                    }
                ],
            },
            "data": {"ca.crt": CA},
        }
    ]
    names = [o["metadata"]["name"] for o in objects]
    assert names.index("llm-tls-config") < objects.index(jobset), "the CA exists before any pod mounts it"


def test_every_trainer_container_gets_it_once() -> None:
    runtime = RUNTIME.node_container(env=[{"name": "KUBEFLOW_TRAINER_SERVER_URL", "value": "stale"}])
    jobset = jobset_of(FRAMEWORK.desired_objects(JOB.obj(), runtime.source(), Observed(status_server=SERVER)))
    urls = [e for e in container_of(jobset, c.NODE)["env"] if e["name"] == "KUBEFLOW_TRAINER_SERVER_URL"]
    assert len(urls) == 1 and urls[0]["value"].endswith("/trainjobs/llm/status")


def test_off_injects_nothing() -> None:
    with_server = FRAMEWORK.desired_objects(JOB.obj(), RUNTIME.source(), Observed(status_server=SERVER))
    without = FRAMEWORK.desired_objects(JOB.obj(), RUNTIME.source(), Observed())
    assert not any(o["metadata"]["name"] == "llm-tls-config" for o in without)
    assert "KUBEFLOW_TRAINER" not in json.dumps(without)
    assert len(with_server) == len(without) + 1


def test_no_ca_yet_is_a_build_error() -> None:
    with pytest.raises(BuildError, match=r"failed to find status server ca\.crt in tls secret"):
        FRAMEWORK.desired_objects(
            JOB.obj(), RUNTIME.source(), Observed(status_server=StatusEndpoint("https://x", None))
        )
