"""A kubelet killed mid-run, for real (issue 23): SIGKILL the kubelet of the node that runs one rank. Its container
keeps running (containerd is alive, nobody told it); the node turns Unknown, its pod is evicted (the runtime
tolerates the unreachable taint for a few seconds only) and stays Terminating: no kubelet confirms it. Kubernetes'
Job controller fails a Job only once every pod of it has terminated (it may mark it `FailureTarget` first), so
the TrainJob does not end while the kubelet is away (nor is it Complete). The kubelet back, it stops the orphaned container, the pod
goes, the Job and the JobSet fail, and the TrainJob ends as the JobSet's policy says (no failurePolicy: Failed,
`FailedJobs`); nothing is left running or stuck, no container in either node's containerd."""

from __future__ import annotations

import time
from typing import Any

import pytest
from real_runtimes import busybox_runtime, containers, pods_of, pods_running, running_containers, shell_trainjob

from harness import realnodes
from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

#: How long a pod stays bound to a node that stopped answering (the default, 300 s, is the DefaultTolerationSeconds
#: admission plugin's; a training job wants to know sooner).
UNREACHABLE_TOLERATION_S = 5


def node_ready(kube: Kube, node: str) -> str:
    got = kube.get("node", node) or {}
    return next((c["status"] for c in got["status"]["conditions"] if c["type"] == "Ready"), "")


def test_a_kubelet_killed_mid_run_fails_the_trainjob_and_leaves_nothing_running(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    runtime = busybox_runtime("fragile")
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["tolerations"] += [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": UNREACHABLE_TOLERATION_S}
        for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")
    ]
    kube.create(runtime, namespace)
    kube.create(shell_trainjob("fragile", "fragile", "exec sleep 600"), namespace)
    eventually(lambda: pods_running(kube, namespace, "fragile"), "both pods Running", timeout=120)
    victim: dict[str, Any] = next(
        p for p in pods_of(kube, namespace, "fragile") if p["metadata"]["name"].startswith("fragile-node-0-1")
    )
    node = victim["spec"]["nodeName"]
    index = int(node.rsplit("-", 1)[1])

    realnodes.kill_kubelet(kube.cluster, index)
    killed = time.monotonic()
    try:
        eventually(lambda: node_ready(kube, node) == "Unknown", f"{node} NotReady (Unknown)", timeout=120)
        not_ready = time.monotonic()
        eventually(
            lambda: (
                (kube.get("pod", victim["metadata"]["name"], namespace) or {})
                .get("metadata", {})
                .get("deletionTimestamp")
            ),
            "the dead node's pod evicted",
            timeout=60,
        )
        job_conditions = [
            c["type"]
            for c in ((kube.get("job", "fragile-node-0", namespace) or {}).get("status") or {}).get("conditions", [])
            if c["status"] == "True"
        ]
        # The dead kubelet's container still runs: the pod it belongs to is Terminating and the TrainJob not over.
        orphaned = running_containers(kube.cluster, namespace)
        assert orphaned, "the dead node's container should still run in its containerd"
        job = kube.get("trainjob", "fragile", namespace) or {}
        assert not condition(job, "Complete") and not condition(job, "Failed"), job
    finally:
        realnodes.restart_kubelet(kube.cluster, index)
    back = time.monotonic()

    failed = eventually(lambda: condition(kube.get("trainjob", "fragile", namespace), "Failed"), "Failed", 120)
    ended = time.monotonic()
    # No failurePolicy: the failed Job fails the JobSet, and the TrainJob copies its words.
    assert failed["reason"] == "FailedJobs", failed
    assert failed["message"].startswith("jobset failed due to one or more job failures"), failed
    assert not condition(kube.get("trainjob", "fragile", namespace), "Complete")

    # The failed Job deleted both pods: the one on the live node at once, the one on the dead node (stuck
    # Terminating meanwhile) once its kubelet is back and has stopped its container.
    eventually(lambda: pods_of(kube, namespace, "fragile") == [], "no pod left, none stuck Terminating", 120)
    eventually(lambda: running_containers(kube.cluster, namespace) == [], "no container running", timeout=60)
    cleaned = time.monotonic()
    # The kubelets remove a deleted pod's containers (sandboxes included) in their next container GC (each minute).
    eventually(lambda: containers(kube.cluster, namespace) == [], "no container left in containerd", timeout=150)
    assert condition(kube.get("trainjob", "fragile", namespace), "Failed") == failed
    print(
        f"kubelet killed: node Unknown after {not_ready - killed:.1f}s ({len(orphaned)} containers of the TrainJob "
        f"still running, the Job {job_conditions}); kubelet back after {back - killed:.1f}s; TrainJob Failed {ended - back:.1f}s and nothing running "
        f"{cleaned - back:.1f}s after that"
    )
