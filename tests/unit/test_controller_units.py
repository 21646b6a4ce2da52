"""Pieces of the operator that need no cluster: defaulting, admission responses, the work queue, config,
certificates, the state column and the reconcile-error condition."""

import asyncio
import base64
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from builders import TrainJobBuilder
from trainjob_operator import certs
from trainjob_operator import config as config_module
from trainjob_operator.api.trainjob import TrainJobStatus
from trainjob_operator.controller.admission import Verdict, response, webhook_configurations
from trainjob_operator.controller.queue import WorkQueue
from trainjob_operator.k8s.client import RateLimiter, resource_name
from trainjob_operator.runtime.defaulting import stamp_patch_times
from trainjob_operator.runtime.status import trainjob_state, with_reconcile_error

NOW = "2026-11-22T12:00:00Z"
EARLIER = "2026-11-22T11:00:00Z"


def patch(manager: str, selector: str = "a", time: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": selector}}}}},
                        }
                    ]
                }
            }
        },
    }
    if time:
        entry["time"] = time
    return entry


def with_patches(*patches: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"runtimePatches": list(patches)}}


@pytest.mark.parametrize(
    ("new", "old", "want"),
    [
        pytest.param(with_patches(patch("a.io/m")), None, [patch("a.io/m", time=NOW)], id="create stamps now"),
        pytest.param(with_patches(patch("a.io/m", time=EARLIER)), None, None, id="create keeps a given time"),
        pytest.param(
            with_patches(patch("a.io/m")),
            with_patches(patch("a.io/m", time=EARLIER)),
            [patch("a.io/m", time=EARLIER)],
            id="an unchanged patch keeps its old time",
        ),
        pytest.param(
            with_patches(patch("a.io/m", "b", time=EARLIER)),
            with_patches(patch("a.io/m", time=EARLIER)),
            [patch("a.io/m", "b", time=NOW)],
            id="a changed patch gets now",
        ),
        pytest.param(
            with_patches(patch("a.io/m", time=EARLIER), patch("b.io/n", time=EARLIER)),
            with_patches(patch("a.io/m", time=EARLIER)),
            None,
            id="a new manager keeps a given time",
        ),
        pytest.param({"spec": {}}, None, None, id="no patches, nothing to do"),
        pytest.param(
            with_patches({"manager": {"x": 1}}, {"manager": ["m"], "time": EARLIER}),
            with_patches({"manager": {"x": 1}}),
            None,
            id="a manager that is no string is left to the schema (found by the admission fuzz: TypeError)",
        ),
        pytest.param(
            with_patches({"manager": 7}, patch("a.io/m")),
            None,
            [{"manager": 7}, patch("a.io/m", time=NOW)],
            id="the other patches are still stamped",
        ),
    ],
)
def test_runtime_patch_times(
    new: dict[str, Any], old: dict[str, Any] | None, want: list[dict[str, Any]] | None
) -> None:
    assert stamp_patch_times(new, old, NOW) == want


def test_admission_response_shapes() -> None:
    denied = response(
        {"uid": "u1"}, Verdict(allowed=False, message="spec.x: Invalid value: 1: bad", warnings=("careful",))
    )
    assert denied == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "u1",
            "allowed": False,
            "warnings": ["careful"],
            "status": {"code": 403, "message": "spec.x: Invalid value: 1: bad", "reason": "Forbidden"},
        },
    }
    ops = [{"op": "replace", "path": "/spec/runtimePatches", "value": []}]
    mutated = response({"uid": "u2"}, Verdict(patch=ops))["response"]
    assert mutated["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(mutated["patch"])) == ops


def test_webhook_configurations_point_at_the_local_server_with_the_ca() -> None:
    cfg = config_module.Webhook(port=19443)
    mutating, validating = webhook_configurations(cfg, "ops", b"CA")
    assert mutating["metadata"]["name"] == "defaulter.trainer.kubeflow.org"
    assert [w["name"] for w in validating["webhooks"]] == [
        "validator.trainjob.trainer.kubeflow.org",
        "validator.trainingruntime.trainer.kubeflow.org",
        "validator.clustertrainingruntime.trainer.kubeflow.org",
    ]
    hook = validating["webhooks"][1]
    assert hook["clientConfig"] == {
        "url": "https://127.0.0.1:19443/validate-trainer-kubeflow-org-v1alpha1-trainingruntime",
        "caBundle": base64.b64encode(b"CA").decode(),
    }
    assert hook["objectSelector"] == {
        "matchExpressions": [
            {"key": "trainer.kubeflow.org/webhook-validation", "operator": "NotIn", "values": ["disabled"]}
        ]
    }
    in_cluster = webhook_configurations(config_module.Webhook(service_name="svc"), "ops", b"CA")[0]
    assert in_cluster["webhooks"][0]["clientConfig"]["service"] == {
        "name": "svc",
        "namespace": "ops",
        "path": "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        "port": 443,
    }


def test_certificates_rotate_when_expiring_or_for_new_hosts() -> None:
    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    bundle = certs.generate(["127.0.0.1"], now, days=365)
    assert bundle.sans() == {"127.0.0.1"}
    assert not certs.needs_rotation(bundle, ["127.0.0.1"], now, before_days=30)
    assert certs.needs_rotation(bundle, ["127.0.0.1"], now + dt.timedelta(days=340), before_days=30)
    assert certs.needs_rotation(bundle, ["svc.ns.svc"], now, before_days=30)


def _signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec

    cert, ca = x509.load_pem_x509_certificate(cert_pem), x509.load_pem_x509_certificate(ca_pem)
    public = ca.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey) and cert.signature_hash_algorithm is not None
    try:
        public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    except InvalidSignature:
        return False
    return cert.issuer == ca.subject


def test_a_rotation_keeps_the_ca_so_the_previous_certificate_stays_trusted() -> None:
    """Found by the certificate rotation under load (issue 17: ca_changed=2): every rotation made a new CA, so
    trainer pods of running TrainJobs (whose CA ConfigMap is never re-applied) lost the status server's CA, and the
    caBundle the rotating replica published no longer covered the certificate another replica still served."""
    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    first = certs.generate(["127.0.0.1"], now, days=365)
    later = now + dt.timedelta(days=340)
    assert certs.ca_outlives(first, later, 365)
    rotated = certs.generate(["127.0.0.1"], later, days=365, ca_of=first)
    assert (rotated.ca_cert, rotated.ca_key) == (first.ca_cert, first.ca_key)
    assert rotated.cert != first.cert and rotated.key != first.key
    assert _signed_by(rotated.cert, first.ca_cert) and _signed_by(first.cert, rotated.ca_cert)
    assert not certs.needs_rotation(rotated, ["127.0.0.1"], later, before_days=30)


@pytest.mark.parametrize(
    ("case", "want"),
    [
        pytest.param("valid for long", True, id="a CA valid past the new certificate (and a day) is kept"),
        pytest.param("expiring", False, id="a CA expiring before the new certificate would: a new CA"),
        pytest.param("other key", False, id="a CA whose key does not match: a new CA"),
        pytest.param("garbage", False, id="an unreadable CA: a new CA"),
    ],
)
def test_when_a_rotation_keeps_the_ca(case: str, want: bool) -> None:
    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    bundle = certs.generate(["127.0.0.1"], now, days=365)  # the CA lasts 730 days
    when = now + dt.timedelta(days=400 if case == "expiring" else 10)
    if case == "other key":
        bundle = certs.Bundle(bundle.ca_cert, certs.generate(["x"], now).ca_key, bundle.cert, bundle.key)
    if case == "garbage":
        bundle = certs.Bundle(b"not a certificate", b"not a key", bundle.cert, bundle.key)
    assert certs.ca_outlives(bundle, when, 365) is want


def test_ensure_certificate_rotates_an_expiring_certificate_under_the_same_ca() -> None:
    from trainjob_operator.controller.admission import ensure_certificate

    now = dt.datetime(2026, 11, 22, tzinfo=dt.UTC)
    old = certs.generate(["127.0.0.1"], now - dt.timedelta(days=350), days=365)
    secret = {
        "metadata": {"name": "cert", "namespace": "ops", "resourceVersion": "5"},
        "data": {
            k: base64.b64encode(v).decode()
            for k, v in (("ca.crt", old.ca_cert), ("ca.key", old.ca_key), ("tls.crt", old.cert), ("tls.key", old.key))
        },
    }
    written: list[dict[str, Any]] = []

    class Secrets:
        async def get(self, *args: Any) -> dict[str, Any]:
            return secret

        async def replace(self, body: dict[str, Any]) -> dict[str, Any]:
            written.append(body)
            return body

    cfg = config_module.Webhook(cert_secret_name="cert")
    bundle = asyncio.run(ensure_certificate(Secrets(), cfg, "ops", now))  # type: ignore[arg-type]
    [body] = written
    assert body["data"]["ca.crt"] == secret["data"]["ca.crt"] and body["data"]["ca.key"] == secret["data"]["ca.key"]
    assert body["metadata"]["resourceVersion"] == "5"
    assert bundle.cert != old.cert and _signed_by(bundle.cert, old.ca_cert)


def test_work_queue_runs_each_key_once_at_a_time_and_coalesces() -> None:
    seen: list[str] = []

    async def scenario() -> None:
        queue: WorkQueue[str] = WorkQueue()
        gate = asyncio.Event()

        async def worker(key: str) -> None:
            seen.append(key)
            if key == "a" and seen.count("a") == 1:
                queue.add("a")  # arrives while "a" runs: one more pass afterwards, not a parallel one
                queue.add("a")
                await gate.wait()

        runner = asyncio.create_task(queue.run(worker, concurrency=2))
        queue.add("a")
        queue.add("b")
        queue.add("b")
        for _ in range(100):
            if "b" in seen:
                break
            await asyncio.sleep(0.01)
        gate.set()
        for _ in range(100):
            if seen.count("a") == 2:
                break
            await asyncio.sleep(0.01)
        runner.cancel()

    asyncio.run(scenario())
    assert sorted(seen) == ["a", "a", "b"]


def test_backoff_grows_and_resets() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.1, max_delay=0.5)
    assert [queue.backoff("k") for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    queue.forget("k")
    assert queue.backoff("k") == 0.1


def test_rate_limiter_enforces_qps_after_the_burst() -> None:
    async def scenario() -> float:
        limiter = RateLimiter(qps=20, burst=2)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _ in range(6):
            await limiter.acquire()
        return loop.time() - start

    assert asyncio.run(scenario()) >= 4 / 20 * 0.9  # two from the burst, four at 20/s


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/x", "jobsets"),
        ("/api/v1/namespaces/ns/configmaps", "configmaps"),
        ("/apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs/b/status", "trainjobs"),
        ("/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/x", "clustertrainingruntimes"),
    ],
)
def test_request_metrics_name_the_resource(path: str, resource: str) -> None:
    assert resource_name(path) == resource


def test_config_file_errors_name_the_field(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("client: {qps: 5, burst: 10}\nwebhook: {port: 9000}\n")
    cfg = config_module.load(good)
    assert (cfg.client.qps, cfg.client.burst, cfg.webhook.port) == (5, 10, 9000)
    bad = tmp_path / "bad.yaml"
    bad.write_text("client: {qps: -1}\nwebhok: {}\n")
    with pytest.raises(config_module.ConfigFileError, match=r"client\.qps.*webhok"):
        config_module.load(bad)


@pytest.mark.parametrize(
    ("builder", "status", "state"),
    [
        pytest.param(TrainJobBuilder.make(), {}, "Pending", id="nothing yet"),
        pytest.param(TrainJobBuilder.make().suspend(), {}, "Suspended", id="suspended"),
        pytest.param(
            TrainJobBuilder.make(),
            {"jobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]},
            "Running",
            id="active",
        ),
        pytest.param(
            TrainJobBuilder.make(), {"conditions": [{"type": "Complete", "status": "True"}]}, "Complete", id="complete"
        ),
        pytest.param(
            TrainJobBuilder.make(), {"conditions": [{"type": "Failed", "status": "True"}]}, "Failed", id="failed"
        ),
        pytest.param(
            TrainJobBuilder.make(), {"conditions": [{"type": "ReconcileFailed", "status": "True"}]}, "Error", id="error"
        ),
    ],
)
def test_state_column(builder: TrainJobBuilder, status: dict[str, Any], state: str) -> None:
    job = builder.obj()
    assert trainjob_state(job, TrainJobStatus.model_validate(status)) == state


def test_reconcile_error_condition_is_set_kept_and_removed() -> None:
    now = dt.datetime(2026, 11, 22, 12, tzinfo=dt.UTC)
    status = with_reconcile_error(TrainJobStatus(), ("BuildFailed", "boom"), now)
    assert status.to_wire() == {
        "conditions": [
            {
                "type": "ReconcileFailed",
                "status": "True",
                "reason": "BuildFailed",
                "message": "boom",
                "lastTransitionTime": NOW,
            }
        ]
    }
    later = with_reconcile_error(
        status.model_copy(deep=True), ("BuildFailed", "boom again"), now + dt.timedelta(hours=1)
    )
    assert later.conditions is not None and later.conditions[0].last_transition_time == NOW
    assert with_reconcile_error(later, None, now).to_wire() == {}


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

    cfg = config_module.StatusServer.model_validate(status_server)
    assert base_url(cfg, webhook_service, webhook_url_host, "ops") == want


def test_the_health_server_on_port_0_reports_the_port_it_got() -> None:
    """Reads aiohttp's private `TCPSite._server` (docs/architecture.md, 'Other libraries' private behaviour')."""
    import aiohttp

    from trainjob_operator.controller.health import HealthServer
    from trainjob_operator.metrics import Metrics

    async def scenario() -> tuple[int, int]:
        server = HealthServer("127.0.0.1", 0, Metrics(), lambda: (True, "ok"), lambda: (True, "ok"))
        port = await server.start()
        try:
            async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                return port, resp.status
        finally:
            await server.stop()

    port, status = asyncio.run(scenario())
    assert (port > 0, status) == (True, 200)


@dataclass
class PublicConfigMapCase:
    stored: dict[str, Any] | None
    create_fails: int | None
    created: bool


PUBLIC_CONFIGMAP_CASES = [
    pytest.param(PublicConfigMapCase(None, None, True), id="missing: created with the version the SDK checks"),
    pytest.param(
        PublicConfigMapCase({"data": {"kubeflow_trainer_version": "v2.4.0"}}, None, False),
        id="present (the chart's): left as it is",
    ),
    pytest.param(PublicConfigMapCase(None, 409, False), id="another replica created it first: fine"),
    pytest.param(PublicConfigMapCase(None, 403, False), id="forbidden: a warning, the operator goes on"),
]


@pytest.mark.parametrize("case", PUBLIC_CONFIGMAP_CASES)
def test_the_sdks_configmap_is_created_where_the_operator_runs(case: PublicConfigMapCase) -> None:
    from trainjob_operator.controller.startup import publish_public_configmap
    from trainjob_operator.k8s.client import ApiError
    from trainjob_operator.runtime.startup import public_configmap

    created: list[dict[str, Any]] = []

    class ConfigMaps:
        async def get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
            assert (api_version, kind, name, namespace) == ("v1", "ConfigMap", "kubeflow-trainer-public", "ops")
            return case.stored

        async def create(self, body: dict[str, Any], field_manager: str) -> dict[str, Any]:
            if case.create_fails is not None:
                raise ApiError(case.create_fails, "Conflict", "no")
            created.append(body)
            return body

    asyncio.run(publish_public_configmap(ConfigMaps(), "ops"))  # type: ignore[arg-type]
    assert created == ([public_configmap("ops")] if case.created else [])
    assert public_configmap("ops")["data"] == {"kubeflow_trainer_version": "v2.3.0"}
