"""The admin's path for real (issue 23, milestone 4): the operator image built from the project's Dockerfile,
`helm install` of the chart on the real nodes with 2 replicas, leader election between them, /readyz and /metrics
answered by the pods, and the API server calling the validating webhook through the chart's Service.

Runs before the tests that start the operator as a local process (file order), and removes what the chart's
operator published (its webhook configurations) when done, so the two never run at once."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from harness import cluster as cluster_lib
from harness import images, realnodes
from operator_fixtures import Kube, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

REPO = Path(__file__).resolve().parents[2]
RELEASE, NAMESPACE = "tjo", "tjo-real"
WEBHOOK_CONFIGURATIONS = (
    ("validatingwebhookconfiguration", "validator.trainer.kubeflow.org"),
    ("mutatingwebhookconfiguration", "defaulter.trainer.kubeflow.org"),
)


def _helm(cluster: cluster_lib.ClusterInfo, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    helm = cluster.bin_dir / "helm"
    if not helm.exists():
        pytest.fail(f"helm is not built in {cluster.bin_dir}: run `make tools-helm`", pytrace=False)
    return subprocess.run(
        [str(helm), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _proxy(kube: Kube, pod: str, path: str) -> str:
    """GET a pod's health port through the API server (which reaches the pod network on this machine)."""
    done = kube.run("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}:8081/proxy{path}", check=False)
    return done.stdout if done.returncode == 0 else ""


def _leader_gauge(metrics: str) -> float:
    for line in metrics.splitlines():
        if line.startswith("trainjob_operator_leader"):
            return float(line.rpartition(" ")[2])
    return -1.0


# The operator image is built (when its inputs changed) and imported into both nodes inside the test: 270 s of
# it under load 15, past pytest's default 300 s.
@pytest.mark.timeout(900)
@pytest.mark.realnode_ci
def test_helm_install_runs_two_replicas_with_one_leader_and_webhooks_through_the_service(
    cluster: cluster_lib.ClusterInfo, kube: Kube, installed: None
) -> None:
    meta = images.build_operator(REPO)
    image = realnodes.load_image_archive(cluster, meta["ref"], Path(meta["archive"]))
    repository, tag = image.rsplit(":", 1)
    values = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "replicas": 2,
        "nodeSelector": realnodes.REAL_NODE_SELECTOR,
        "tolerations": [realnodes.REAL_NODE_TOLERATION],
    }
    created = time.monotonic()
    try:
        done = _helm(
            cluster,
            "install",
            RELEASE,
            str(REPO / "charts" / "trainjob-operator"),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--take-ownership",
            "--set-json",
            f"image={json.dumps(values['image'])}",
            "--set",
            "replicas=2",
            "--set-json",
            f"nodeSelector={json.dumps(values['nodeSelector'])}",
            "--set-json",
            f"tolerations={json.dumps(values['tolerations'])}",
            "--wait",
            "--timeout",
            "240s",
        )
        pods = kube.items("pods", NAMESPACE)
        assert done.returncode == 0, (done.stderr, [p.get("status") for p in pods])
        ready = time.monotonic()
        assert len(pods) == 2
        assert {p["spec"]["nodeName"] for p in pods} <= {"real-node-0", "real-node-1"}
        assert all(p["status"]["containerStatuses"][0]["containerID"].startswith("containerd://") for p in pods)
        names = [p["metadata"]["name"] for p in pods]

        # Both answer /readyz (the standby says it stands by); exactly one leads.
        eventually(lambda: all(_proxy(kube, n, "/readyz") for n in names), "both replicas' /readyz", timeout=60)
        eventually(
            lambda: sorted(_leader_gauge(_proxy(kube, n, "/metrics")) for n in names) == [0.0, 1.0],
            "one leader and one standby in /metrics",
            timeout=90,
        )

        # The API server calls the validating webhook through the chart's Service on the pod network.
        kube.run("create", "namespace", "tjo-real-jobs", check=False)

        def denied() -> str:
            bad: dict[str, Any] = {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "metadata": {"name": "orphan", "namespace": "tjo-real-jobs"},
                "spec": {"runtimeRef": {"name": "nope"}},
            }
            result = kube.run("create", "--dry-run=server", "-f", "-", stdin=json.dumps(bad), check=False)
            return result.stderr if "denied the request" in result.stderr else ""

        message = eventually(denied, "the webhook to deny a TrainJob of a missing runtime", timeout=90)
        assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in message
        assert "specified clusterTrainingRuntime must be created before the TrainJob is created" in message
        print(f"chart on real nodes: 2 replicas Ready {ready - created:.1f}s after helm install; image {meta}")
    finally:
        _helm(cluster, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "120s")
        for kind, name in WEBHOOK_CONFIGURATIONS:
            kube.delete(kind, name)
        kube.run("delete", "namespace", NAMESPACE, "tjo-real-jobs", "--ignore-not-found", "--wait=false", check=False)
        # The chart's replicas gone before the next test starts the operator as a local process.
        eventually(lambda: kube.get("namespace", NAMESPACE) is None, f"namespace {NAMESPACE} deleted", timeout=120)
