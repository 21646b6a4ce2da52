"""Progress from a pod for real (issue 23): the unmodified kubeflow SDK (the lock's `kubeflow==0.5.0`, in an image
built here) calls `update_trainjob_status()` inside a trainer pod on a real node, with the env, the CA and the
token the kubelet projected for that pod, and the update lands in `status.trainerStatus`. The operator runs on
this machine; its status server listens on the real nodes' bridge address (`realnodes.HOST_FOR_PODS`)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from real_runtimes import run_one_pod

from harness import images, realnodes
from operator_fixtures import Kube, OperatorProcess, UIServer, condition, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("sdk",)

#: Inside the pod: what the kubelet projected (the token's audience and the pod it is bound to, read from its
#: claims, not verified: the status server does that), then the SDK's own call, as a training script makes it.
SDK_CALL = """
import base64, json, os, sys
from kubeflow.trainer import update_trainjob_status
with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
    payload = f.read().split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
print("token " + json.dumps({"aud": claims["aud"], "pod": claims["kubernetes.io"]["pod"]}), flush=True)
ok = update_trainjob_status(progress_percent=42, estimated_remaining_seconds=120,
                            metrics={"loss": 0.25, "accuracy": "0.91"})
print(f"update_trainjob_status returned {ok}", flush=True)
sys.exit(0 if ok else 1)
"""


@pytest.mark.realnode_ci
def test_the_sdk_in_a_real_pod_reports_progress(
    kube: Kube, operator: OperatorProcess, namespace: str, ui: UIServer
) -> None:
    run = run_one_pod(kube, namespace, "progress", realnodes.load_image(kube.cluster, "sdk"), "sdk-real", SDK_CALL)
    job, pod, log = run.job, run.pod, run.log
    assert condition(job, "Complete"), (job.get("status"), log, operator.log())
    assert "update_trainjob_status returned True" in log, log

    # The pod was told to call the status server where it listens, with the kubelet's token for this very pod.
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        f"https://{realnodes.HOST_FOR_PODS}:{operator.status_port}/apis/trainer.kubeflow.org/v1alpha1"
        f"/namespaces/{namespace}/trainjobs/progress/status"
    )
    printed = re.search(r"^token (.*)$", log, re.M)
    assert printed is not None, log
    token = json.loads(printed.group(1))
    assert token == {
        "aud": [f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/progress/status"],
        "pod": {"name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]},
    }
    assert pod["spec"]["nodeName"] in ("real-node-0", "real-node-1")
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")

    trainer_status = dict(job["status"]["trainerStatus"])
    stamp = trainer_status.pop("lastUpdatedTime")
    assert trainer_status == {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.25"}, {"name": "accuracy", "value": "0.91"}],
    }
    assert stamp.endswith("Z")
    assert operator.metric("trainjob_operator_status_updates_total", code="200") >= 1

    # The UI shows what the pod reported (the row its table and `/api/stream` serve).
    def ui_row() -> dict[str, Any] | None:
        with ui.open("api/trainjobs") as response:
            rows = json.loads(response.read())["rows"]
        row = next((r for r in rows if (r["namespace"], r["name"]) == (namespace, "progress")), None)
        return row if row is not None and row["progress"] is not None else None

    row = eventually(ui_row, "the progress in the UI's rows", timeout=60)
    assert (row["state"], row["progress"], row["remainingSeconds"], row["metrics"]) == (
        "Complete",
        42,
        120,
        [{"name": "loss", "value": "0.25"}, {"name": "accuracy", "value": "0.91"}],
    )
    print(f"progress from a pod: Complete {run.seconds:.1f}s after creation; image {images.metadata('sdk')}")
