"""Progress from training pods, end to end on the local control plane: the operator injects upstream's env, token
volume and CA into trainer pods; the unmodified `kubeflow` SDK helper (`update_trainjob_status`), run as a process
with that pod's env and a token the API server issued for that pod, writes `status.trainerStatus`; and everything
else — forged, expired, wrong-audience, wrong-TrainJob, unbound, oversized, malformed, too frequent — gets
upstream's `metav1.Status` answers."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from builders import torch_runtime, trainjob_object
from operator_fixtures import Kube, OperatorProcess, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

RUN_FOR = "trainjob-operator.test/run-for"
SDK_CALL = """
import sys
from kubeflow.trainer import update_trainjob_status
ok = update_trainjob_status(progress_percent=42, estimated_remaining_seconds=120,
                            metrics={"loss": 0.25, "accuracy": "0.91"})
sys.exit(0 if ok else 1)
"""


def runtime(namespace: str) -> dict[str, Any]:
    return torch_runtime(namespace, pod_annotations={RUN_FOR: "600s"}, command=("torchrun",), backoff_limit=None)


def running_pod(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    def pod() -> dict[str, Any] | None:
        for item in kube.items("pods", namespace):
            if (item["metadata"].get("labels") or {}).get(c.JOBSET_NAME_LABEL) == name and (
                item.get("status") or {}
            ).get("phase") == "Running":
                return item
        return None

    found: dict[str, Any] = eventually(pod, f"a running pod of {name}", timeout=90)
    return found


def token(
    kube: Kube, namespace: str, audience: str, pod: dict[str, Any] | None = None, account: str = "default"
) -> str:
    args = ["create", "token", account, "-n", namespace, "--audience", audience, "--duration", "10m"]
    if pod is not None:
        args += [
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            pod["metadata"]["name"],
            "--bound-object-uid",
            pod["metadata"]["uid"],
        ]
    return kube.run(*args).stdout.strip()


def audience(namespace: str, name: str) -> str:
    return f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


class Job:
    """One running TrainJob with what its trainer pod was given."""

    def __init__(self, kube: Kube, namespace: str, name: str, tmp: Path) -> None:
        self.namespace, self.name = namespace, name
        self.pod = running_pod(kube, namespace, name)
        node = next(ct for ct in self.pod["spec"]["containers"] if ct["name"] == "node")
        self.env = {e["name"]: e.get("value") for e in node.get("env") or []}
        self.mounts = node.get("volumeMounts") or []
        self.volumes = self.pod["spec"].get("volumes") or []
        configmap = kube.get("configmap", f"{name}-tls-config", namespace)
        assert configmap is not None, "the CA ConfigMap trainer pods mount"
        self.ca = tmp / f"{name}-ca.crt"
        self.ca.write_text(configmap["data"]["ca.crt"])
        self.token = token(kube, namespace, audience(namespace, name), self.pod)

    @property
    def url(self) -> str:
        return str(self.env["KUBEFLOW_TRAINER_SERVER_URL"])


def post(url: str, ca: Path, bearer: str | None, body: bytes | dict[str, Any]) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    if bearer is not None:
        request.add_header("Authorization", f"Bearer {bearer}")
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=15) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@pytest.fixture
def jobs(kube: Kube, operator: OperatorProcess, namespace: str, tmp_path: Path) -> tuple[Job, Job]:
    kube.apply(runtime(namespace), trainjob_object(namespace, "alpha"), trainjob_object(namespace, "beta"))
    return Job(kube, namespace, "alpha", tmp_path), Job(kube, namespace, "beta", tmp_path)


def test_the_sdk_helper_reports_progress_from_a_trainer_pod(
    kube: Kube, operator: OperatorProcess, jobs: tuple[Job, Job], tmp_path: Path
) -> None:
    job = jobs[0]
    assert {k: v for k, v in job.env.items() if k.startswith("KUBEFLOW_TRAINER_")} == {
        "KUBEFLOW_TRAINER_SERVER_URL": f"https://127.0.0.1:{operator.status_port}/apis/trainer.kubeflow.org/v1alpha1"
        f"/namespaces/{job.namespace}/trainjobs/alpha/status",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": "/var/run/secrets/kubeflow/trainer/ca.crt",
        "KUBEFLOW_TRAINER_SERVER_TOKEN": "/var/run/secrets/kubeflow/trainer/token",
    }
    assert {
        "name": "kubeflow-trainer-token",
        "mountPath": "/var/run/secrets/kubeflow/trainer",
        "readOnly": True,
    } in job.mounts
    projected = next(v for v in job.volumes if v["name"] == "kubeflow-trainer-token")["projected"]["sources"]
    assert projected[0]["serviceAccountToken"] == {
        "audience": audience(job.namespace, "alpha"),
        "expirationSeconds": 3600,
        "path": "token",
    }

    # The pod's files, where this host can read them: the CA from the ConfigMap, a token the API server issued for
    # this very pod with the projected volume's audience.
    token_file = tmp_path / "token"
    token_file.write_text(job.token)
    env = {
        **os.environ,
        "KUBEFLOW_TRAINER_SERVER_URL": job.url,
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(job.ca),
        "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token_file),
    }
    result = subprocess.run([sys.executable, "-c", SDK_CALL], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"update_trainjob_status returned False: {result.stderr}\n{operator.log()}"

    current = json.loads(
        kube.run("get", "trainjob", "alpha", "-n", job.namespace, "-o", "json", "--show-managed-fields").stdout
    )
    trainer_status = current["status"]["trainerStatus"]
    stamp = trainer_status.pop("lastUpdatedTime")
    assert trainer_status == {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.25"}, {"name": "accuracy", "value": "0.91"}],
    }
    assert stamp.endswith("Z") and len(stamp) == len("2026-11-23T10:00:00Z")
    managers = {m["manager"]: m for m in current["metadata"]["managedFields"]}
    assert "f:trainerStatus" in json.dumps(managers["trainer-status"]["fieldsV1"])
    assert "f:conditions" not in json.dumps(managers["trainer-status"]["fieldsV1"]), "it owns trainerStatus only"
    assert operator.metric("trainjob_operator_status_updates_total", code="200") >= 1
    count = operator.metric("trainjob_operator_status_update_duration_seconds_count")
    total = operator.metric("trainjob_operator_status_update_duration_seconds_sum")
    print(
        f"\nstatus server: {count:.0f} request(s), mean {total / count * 1000:.1f} ms (TokenReview, pod and "
        f"status apply included)"
    )


def test_everything_else_gets_upstreams_answers(
    kube: Kube, operator: OperatorProcess, jobs: tuple[Job, Job], tmp_path: Path
) -> None:
    alpha, beta = jobs
    ns = alpha.namespace
    forbidden = (403, status(403, "Forbidden", "Forbidden"))
    good = {"trainerStatus": {"progressPercentage": 7, "lastUpdatedTime": "2026-11-23T10:00:00Z"}}
    fake = base64.urlsafe_b64encode(json.dumps({"aud": [audience(ns, "alpha")], "exp": 4102444800}).encode())
    cases = {
        "no token": (alpha.url, None, good),
        "a forged token": (alpha.url, f"eyJhbGciOiJSUzI1NiJ9.{fake.decode().rstrip('=')}.c2lnbmF0dXJl", good),
        "a token for the API server's audience": (
            alpha.url,
            token(kube, ns, "https://kubernetes.default.svc.cluster.local", alpha.pod),
            good,
        ),
        "alpha's token on beta's route": (beta.url, alpha.token, good),
        "a token for beta's audience bound to alpha's pod": (
            beta.url,
            token(kube, ns, audience(ns, "beta"), alpha.pod),
            good,
        ),
        "a token with the audience but bound to no pod": (alpha.url, token(kube, ns, audience(ns, "alpha")), good),
    }
    for what, (url, bearer, body) in cases.items():
        assert post(url, alpha.ca, bearer, body) == forbidden, what

    assert post(alpha.url, alpha.ca, alpha.token, b"x" * 70000) == (
        413,
        status(413, "RequestEntityTooLarge", "Payload too large"),
    )
    assert post(alpha.url, alpha.ca, alpha.token, b"{not json") == (422, status(422, "Invalid", "Invalid payload"))
    assert post(alpha.url, alpha.ca, alpha.token, {"trainerStatus": {"progressPercentage": "7"}}) == (
        422,
        status(422, "Invalid", "Invalid payload"),
    )
    code, answer = post(
        alpha.url,
        alpha.ca,
        alpha.token,
        {"trainerStatus": {"progressPercentage": 150, "lastUpdatedTime": "2026-11-23T10:00:00Z"}},
    )
    assert (code, answer["reason"]) == (422, "Invalid") and "progressPercentage" in answer["message"], answer
    code, answer = post(alpha.url, alpha.ca, alpha.token, {"trainerStatus": {"progressPercentage": 7}})
    assert (code, answer["reason"]) == (422, "Invalid") and "lastUpdatedTime is required" in answer["message"]
    assert post(alpha.url, alpha.ca, alpha.token, {}) == (200, {}), "no trainerStatus: echoed, nothing written"
    assert post(alpha.url.replace("/status", "/scale"), alpha.ca, alpha.token, good) == (
        404,
        status(404, "NotFound", "Not found"),
    )
    assert ((kube.get("trainjob", "alpha", ns) or {}).get("status") or {}).get("trainerStatus") is None, (
        "no refused request wrote anything"
    )
    assert post(beta.url, beta.ca, beta.token, good)[0] == 200, "beta's own token still works"


def test_expired_tokens_signed_by_the_issuer_are_refused(
    kube: Kube, operator: OperatorProcess, jobs: tuple[Job, Job]
) -> None:
    alpha = jobs[0]
    key = signing_key(kube)
    if key is None:
        pytest.skip("the API server's service-account signing key is not readable on this host")
    claims = json.loads(base64.urlsafe_b64decode(alpha.token.split(".")[1] + "=="))
    now = int(time.time())
    fresh = resign(alpha.token, {**claims, "iat": now - 60, "nbf": now - 60, "exp": now + 600}, key)
    expired = resign(alpha.token, {**claims, "iat": now - 7200, "nbf": now - 7200, "exp": now - 3600}, key)
    good = {"trainerStatus": {"progressPercentage": 9, "lastUpdatedTime": "2026-11-23T10:00:00Z"}}
    assert post(alpha.url, alpha.ca, fresh, good)[0] == 200, "control: the same claims, re-signed, not expired"
    assert post(alpha.url, alpha.ca, expired, good) == (403, status(403, "Forbidden", "Forbidden"))


def test_updates_are_rate_limited_per_trainjob(kube: Kube, operator: OperatorProcess, jobs: tuple[Job, Job]) -> None:
    alpha, beta = jobs
    started = time.perf_counter()
    codes = [post(alpha.url, alpha.ca, alpha.token, {})[0] for _ in range(40)]
    each = (time.perf_counter() - started) / 40 * 1000
    print(
        f"\n40 authenticated requests (new TLS connection each): {each:.1f} ms per request; "
        f"answers {sorted(set(codes))}"
    )
    assert codes.count(429) > 0 and codes[0] == 200, codes
    assert post(alpha.url, alpha.ca, alpha.token, {}) == (429, status(429, "TooManyRequests", "Too many requests"))
    assert post(beta.url, beta.ca, beta.token, {})[0] == 200, "another TrainJob keeps its own budget"


# --- an expired token, signed like the API server signs ------------------------------------------------------------


def signing_key(kube: Kube) -> bytes | None:
    """The service-account signing key of this cluster's kube-apiserver (a local process), found by its port."""
    server = kube.run("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}").stdout
    port = server.rstrip("/").rsplit(":", 1)[-1]
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not args or not args[0].endswith(b"kube-apiserver") or f"--secure-port={port}".encode() not in args:
            continue
        for arg in args:
            if arg.startswith(b"--service-account-signing-key-file="):
                path = Path(arg.split(b"=", 1)[1].decode())
                return path.read_bytes() if path.exists() else None
    return None


def resign(original: str, claims: dict[str, Any], key_pem: bytes) -> str:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    header = original.split(".")[0]
    signing_input = f"{header}.{b64(json.dumps(claims).encode())}".encode()
    key = serialization.load_pem_private_key(key_pem, password=None)
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    else:
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        r, s = utils.decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
        size = (key.curve.key_size + 7) // 8
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    return f"{signing_input.decode()}.{b64(signature)}"
