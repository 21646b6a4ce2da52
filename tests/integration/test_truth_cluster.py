"""Issue 27 on the real API server, JobSet controller, scheduler and kwok nodes: NODES counts an MPI launcher that
runs as a node, pods that cannot be scheduled are not `Running` and say why, and failing pods give `Restarting`,
RESTARTS and one Warning Event naming the pod and its exit code, in `kubectl get`, `describe` and the status."""

from __future__ import annotations

from typing import Any

import pytest

from builders import trainjob_object as trainjob
from operator_fixtures import Kube, OperatorProcess, condition, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

RUN_FOR = "trainjob-operator.test/run-for"
EXIT_CODE = "trainjob-operator.test/exit-code"


def _job(name: str, ancestor: str | None, pod: dict[str, Any], **spec: Any) -> dict[str, Any]:
    labels = {c.ANCESTOR_LABEL: ancestor} if ancestor else {}
    return {"name": name, "template": {"metadata": {"labels": labels}, "spec": {**spec, "template": pod}}}


def _pod(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0", "command": ["train"]}], **spec}
    }
    if annotations:
        pod["metadata"] = {"annotations": annotations}
    return pod


def runtime(namespace: str, name: str, ml_policy: dict[str, Any], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"mlPolicy": ml_policy, "template": {"spec": {"replicatedJobs": jobs}}},
    }


def status_of(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict((kube.get("trainjob", name, namespace) or {}).get("status") or {})


def columns(kube: Kube, namespace: str, name: str, wide: bool = False) -> dict[str, str]:
    """`kubectl get trainjob` as the user reads it: column → value."""
    args = ["get", "trainjob", name, "-n", namespace, *(["-o", "wide"] if wide else [])]
    header, row = kube.run(*args).stdout.splitlines()[:2]
    starts = [header.index(h) for h in header.split()]
    ends = [*starts[1:], None]
    return {header[s:e].strip(): row[s:e].strip() for s, e in zip(starts, ends, strict=True)}


def events_of(kube: Kube, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in kube.items("events", namespace)
        if e["involvedObject"].get("kind") == "TrainJob"
        and e["involvedObject"].get("name") == name
        and e.get("reason") == reason
    ]


def test_an_mpi_trainjob_with_the_launcher_as_a_node_shows_the_nodes_asked_for(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    running = _pod({RUN_FOR: "600s"})
    kube.apply(
        runtime(
            namespace,
            "mpi",
            {"numNodes": 1, "mpi": {"numProcPerNode": 1, "runLauncherAsNode": True}},
            [_job("node", None, running), _job("launcher", "trainer", running)],
        ),
        trainjob(namespace, "mpi-three", "mpi", trainer={"numNodes": 3}),
    )
    eventually(lambda: columns(kube, namespace, "mpi-three").get("STATE") == "Running", "Running", timeout=90)
    assert columns(kube, namespace, "mpi-three")["NODES"] == "3"
    assert status_of(kube, namespace, "mpi-three")["nodes"] == 3
    hostfile = kube.get("configmap", "mpi-three-mpi-hostfile", namespace)
    assert hostfile is not None and len(hostfile["data"]["hostfile"].splitlines()) == 3, "NODES is the hostfile's hosts"


def test_pods_that_cannot_be_scheduled_are_pending_and_say_why(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(
        runtime(
            namespace, "torch-gpu", {"numNodes": 1, "torch": {}}, [_job("node", "trainer", _pod({RUN_FOR: "600s"}))]
        ),
        trainjob(
            namespace,
            "too-big",
            "torch-gpu",
            trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 100}}},
        ),
    )
    status = eventually(
        lambda: (s := status_of(kube, namespace, "too-big")).get("reason") == "Unschedulable" and s,
        "reason Unschedulable",
        timeout=90,
    )
    assert status["state"] == "Pending"
    assert status["message"].startswith("pod too-big-node-0-") and "Insufficient nvidia.com/gpu" in status["message"]
    shown = columns(kube, namespace, "too-big", wide=True)
    assert (shown["STATE"], shown["REASON"], shown["NODES"]) == ("Pending", "Unschedulable", "2")
    assert "Insufficient nvidia.com/gpu" in shown["MESSAGE"]
    [warning] = eventually(lambda: events_of(kube, namespace, "too-big", "PodUnschedulable"), "a Warning Event")
    assert warning["type"] == "Warning" and "cannot be scheduled" in warning["message"]
    described = kube.run("describe", "trainjob", "too-big", "-n", namespace).stdout
    assert "PodUnschedulable" in described and "Unschedulable" in described
    assert not status.get("conditions"), "no condition: the kubeflow SDK's view is upstream's"


def test_failing_pods_restart_visibly_with_one_warning_naming_the_pod_and_exit_code(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    failing = _pod({RUN_FOR: "1s", EXIT_CODE: "3"}, restartPolicy="Never")
    kube.apply(
        runtime(namespace, "crashy", {"numNodes": 1, "torch": {}}, [_job("node", "trainer", failing, backoffLimit=2)]),
        trainjob(namespace, "crash", "crashy"),
    )
    status = eventually(
        lambda: (s := status_of(kube, namespace, "crash")).get("state") == "Restarting" and s,
        "Restarting after the first failure",
        timeout=90,
    )
    assert status["reason"] == "PodFailed" and "exited with code 3 (Error)" in status["message"], status
    assert columns(kube, namespace, "crash")["REASON"] == "PodFailed"
    [warning] = eventually(lambda: events_of(kube, namespace, "crash", "PodFailed"), "a Warning Event")
    assert warning["type"] == "Warning"
    assert warning["message"].startswith("pod crash-node-0-0-") and "exited with code 3" in warning["message"]

    eventually(
        lambda: (status_of(kube, namespace, "crash").get("restarts") or 0) >= 1,
        "RESTARTS 1 once the Job replaced the failed pod",
        timeout=60,
    )
    failed = eventually(lambda: condition(kube.get("trainjob", "crash", namespace), "Failed"), "Failed", timeout=150)
    assert failed["status"] == "True"
    final = status_of(kube, namespace, "crash")
    assert (final["state"], final["restarts"], final["restartCounts"]["pods"]) == ("Failed", 2, 2), (
        "backoffLimit 2: two failed pods replaced; the third ended the Job and the JobSet (no JobSet restart)"
    )
    assert columns(kube, namespace, "crash")["RESTARTS"] == "2"
    assert len(events_of(kube, namespace, "crash", "PodFailed")) == 1, "three failures alike: one Warning Event"
