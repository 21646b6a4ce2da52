"""Issue 13 end to end with Kueue v0.19 (unmodified) and the kubeflow SDK 0.5.0 (unmodified): the SDK sees
Running for a job Kueue resumed, a TrainJob too big for its queue is resized while suspended and then admitted
(Kueue recomputes the quota from the TrainJob), and the TTL deletes a finished, Kueue-managed TrainJob."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_support import get, pods, queued_job, wait_condition

from builders import rjob
from operator_fixtures import Kube, OperatorProcess, condition, condition_status, eventually

pytest.importorskip("kubeflow.trainer", reason="needs the kubeflow SDK: pip install kubeflow==0.5.0")
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.kueue, pytest.mark.timeout(300)]


@pytest.fixture
def client(kubeconfig: str, namespace: str, operator: OperatorProcess) -> TrainerClient:
    return TrainerClient(KubernetesBackendConfig(namespace=namespace, config_file=kubeconfig))


def workload_of(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return next(
        (w for w in kube.items("workloads", namespace) if w["metadata"]["ownerReferences"][0]["name"] == name), None
    )


def test_the_sdk_sees_running_for_a_job_kueue_resumed(
    client: TrainerClient, kube: Kube, namespace: str, local_queue: str
) -> None:
    kube.apply(queued_job("sdk-running", local_queue, "40s"), namespace=namespace)
    # Kueue's webhook created it suspended; our operator said so; Kueue admitted and resumed it.
    job = client.wait_for_job_status("sdk-running", status={"Running"}, timeout=90, polling_interval=1)
    assert job.status == "Running"
    status = get(kube, "trainjob", "sdk-running", namespace)["status"]
    assert ("conditions" not in status, status["state"], bool(status["startTime"])) == (True, "Running", True)
    workload = workload_of(kube, namespace, "sdk-running")
    assert workload is not None and condition_status(workload, "Admitted") == "True"
    # Kueue still reads the finish from the TrainJob: the Workload is Finished when the job completes.
    wait_condition(kube, namespace, "sdk-running", "Complete", timeout=90)
    eventually(
        lambda: (w := workload_of(kube, namespace, "sdk-running")) and condition(w, "Finished"),
        "Kueue's Workload Finished",
        timeout=60,
    )
    assert client.get_job("sdk-running").status == "Complete"


def test_a_job_too_big_for_its_queue_is_resized_while_suspended_and_admitted(
    kube: Kube, namespace: str, local_queue: str
) -> None:
    too_big = queued_job("resize", local_queue, "5s")
    too_big["spec"]["trainer"]["numNodes"] = 3  # 3 x 4 GPUs > the queue's 8
    kube.apply(too_big, namespace=namespace)
    eventually(
        lambda: (
            (w := workload_of(kube, namespace, "resize"))
            and condition(w, "QuotaReserved")
            and condition(w, "QuotaReserved")["status"] == "False"
        ),
        "the Workload waiting for quota",
        timeout=60,
    )
    old = eventually(lambda: kube.get("jobset", "resize", namespace), "the suspended JobSet")
    assert rjob(old, "node")["template"]["spec"]["parallelism"] == 3
    kube.patch("trainjob", "resize", namespace, {"spec": {"trainer": {"numNodes": 2}}})
    cond = wait_condition(kube, namespace, "resize", "Complete", timeout=120)
    assert cond["status"] == "True"
    jobset = get(kube, "jobset", "resize", namespace)
    assert jobset["metadata"]["uid"] != old["metadata"]["uid"]
    node = rjob(jobset, "node")
    env = {e["name"]: e.get("value") for e in node["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (node["template"]["spec"]["parallelism"], env["PET_NNODES"]) == (2, "2")
    workload = workload_of(kube, namespace, "resize")
    assert workload is not None
    node_set = next(ps for ps in workload["spec"]["podSets"] if ps["name"] == "node")
    assert node_set["count"] == 2, "Kueue recomputed the quota from the resized TrainJob"
    assert get(kube, "trainjob", "resize", namespace)["status"]["nodes"] == 2


def test_ttl_deletes_a_finished_kueue_job(kube: Kube, namespace: str, local_queue: str) -> None:
    job = queued_job("ttl", local_queue, "2s")
    job["spec"]["ttlSecondsAfterFinished"] = 5
    kube.apply(job, namespace=namespace)
    eventually(lambda: not get(kube, "trainjob", "ttl", namespace)["spec"].get("suspend"), "admitted", timeout=60)
    kept = get(kube, "trainjob", "ttl", namespace)["spec"].get("ttlSecondsAfterFinished")
    wait_condition(kube, namespace, "ttl", "Complete", timeout=90)
    eventually(lambda: kube.get("trainjob", "ttl", namespace) is None, "the TrainJob deleted by its TTL", timeout=60)
    eventually(lambda: not pods(kube, namespace, "ttl"), "its pods garbage-collected", timeout=90)
    assert kept == 5, "Kueue's update on admission kept the TTL"
