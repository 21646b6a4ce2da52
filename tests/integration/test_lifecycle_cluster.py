"""Issue 13 on the real API server, JobSet controller, scheduler, garbage collector and kwok nodes: TTL (also
across an operator restart), the runtime's run policy, resize while suspended (JobSet rebuilt, MPI Secret kept),
restart counts across a re-created JobSet, the startup deadline."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from operator_fixtures import Kube, OperatorProcess, condition, condition_status, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

RUN_FOR = "trainjob-operator.test/run-for"
EXIT_CODE = "trainjob-operator.test/exit-code"


def runtime(
    namespace: str,
    name: str,
    pod_annotations: dict[str, str] | None = None,
    pod_spec: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "spec": {
            "containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0", "command": ["torchrun", "train.py"]}],
            **(pod_spec or {}),
        }
    }
    if pod_annotations:
        pod["metadata"] = {"annotations": pod_annotations}
    rjob = {
        "name": "node",
        "template": {
            "metadata": {"labels": {c.ANCESTOR_LABEL: "trainer"}},
            "spec": {"backoffLimit": 0, "template": pod},
        },
    }
    template = {"spec": {"replicatedJobs": [rjob], **spec.pop("jobset", {})}}
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": template, **spec},
    }


def trainjob(namespace: str, name: str, runtime_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime_name, "kind": "TrainingRuntime"}, **spec},
    }


def status_of(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict((kube.get("trainjob", name, namespace) or {}).get("status") or {})


def parse(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_ttl_deletes_the_finished_trainjob_with_its_children(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(runtime(namespace, "quick"), trainjob(namespace, "ttl-job", "quick", ttlSecondsAfterFinished=3))
    finished = eventually(
        lambda: (s := status_of(kube, namespace, "ttl-job")).get("completionTime") and s, "completionTime", timeout=90
    )
    assert condition_status({"status": finished}, "Complete") == "True"
    assert parse(finished["startTime"]) <= parse(finished["completionTime"])
    seen_finished = time.monotonic()
    eventually(
        lambda: kube.get("trainjob", "ttl-job", namespace) is None, "the TrainJob deleted by its TTL", timeout=30
    )
    assert time.monotonic() - seen_finished < 30
    eventually(lambda: kube.get("jobset", "ttl-job", namespace) is None, "its JobSet garbage-collected", timeout=60)


def test_runtime_ttl_survives_an_operator_restart(
    kube: Kube, operator: OperatorProcess, namespace: str, tmp_path: Any
) -> None:
    """The TTL lives in status.completionTime, not in the operator: one that expired while the operator was down
    is enforced when it comes back."""
    kube.apply(
        runtime(namespace, "ttl-default", runPolicy={"ttlSecondsAfterFinished": 15}),
        trainjob(namespace, "outlives", "ttl-default"),
    )
    finished = eventually(
        lambda: status_of(kube, namespace, "outlives").get("completionTime"), "completionTime", timeout=90
    )
    operator.stop(kill=True)  # a crash: nothing in memory survives
    try:
        expiry = parse(finished) + dt.timedelta(seconds=15)
        eventually(
            lambda: dt.datetime.now(dt.UTC) > expiry + dt.timedelta(seconds=1), "the TTL to pass while down", timeout=30
        )
        assert kube.get("trainjob", "outlives", namespace) is not None, "nobody deletes it while the operator is down"
    finally:
        operator.start(tmp_path)
    eventually(operator.ready, "the operator back", timeout=60)
    eventually(
        lambda: kube.get("trainjob", "outlives", namespace) is None, "deleted once the operator is back", timeout=60
    )


def test_ttl_is_mutable_and_not_applied_before_the_job_finishes(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(
        runtime(namespace, "slow-ttl", pod_annotations={RUN_FOR: "300s"}),
        trainjob(namespace, "kept", "slow-ttl", ttlSecondsAfterFinished=0),
    )
    eventually(lambda: status_of(kube, namespace, "kept").get("state") == "Running", "Running", timeout=60)
    assert kube.patch("trainjob", "kept", namespace, {"spec": {"ttlSecondsAfterFinished": 3600}}).returncode == 0
    status = status_of(kube, namespace, "kept")
    assert ("completionTime" not in status, kube.get("trainjob", "kept", namespace) is not None) == (True, True)


def jobset_node(jobset: dict[str, Any]) -> dict[str, Any]:
    return next(rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == c.NODE)


def test_resize_while_suspended_rebuilds_the_jobset(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    kube.apply(
        runtime(namespace, "resizable", pod_annotations={RUN_FOR: "300s"}),
        trainjob(namespace, "resized", "resizable", suspend=True, trainer={"numNodes": 1}),
    )
    old = eventually(lambda: kube.get("jobset", "resized", namespace), "the suspended JobSet")
    refused = kube.patch("trainjob", "resized", namespace, {"spec": {"trainer": {"image": "other"}}}, check=False)
    assert "spec.trainer: Invalid value: field is immutable" in refused.stderr
    kube.patch(
        "trainjob",
        "resized",
        namespace,
        {"spec": {"trainer": {"numNodes": 3, "resourcesPerNode": {"limits": {"cpu": "2"}}}}},
    )

    def rebuilt() -> dict[str, Any] | None:
        jobset = kube.get("jobset", "resized", namespace)
        if jobset is None or jobset["metadata"]["uid"] == old["metadata"]["uid"]:
            return None
        return jobset

    jobset = eventually(rebuilt, "the JobSet rebuilt at the new size", timeout=60)
    node = jobset_node(jobset)
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (
        node["template"]["spec"]["parallelism"],
        env["PET_NNODES"],
        container["resources"]["limits"]["cpu"],
        jobset["spec"]["suspend"],
    ) == (3, "3", "2", True)
    kube.patch("trainjob", "resized", namespace, {"spec": {"suspend": False}})
    running = eventually(
        lambda: (s := status_of(kube, namespace, "resized")).get("state") == "Running" and s,
        "Running at the new size",
        timeout=60,
    )
    assert (running["nodes"], "conditions" in running) == (3, False)
    assert kube.existing("jobset", "resized", namespace)["metadata"]["uid"] == jobset["metadata"]["uid"]
    refused = kube.patch("trainjob", "resized", namespace, {"spec": {"trainer": {"numNodes": 1}}}, check=False)
    assert "spec.trainer: Invalid value: field is immutable" in refused.stderr


def test_resize_keeps_the_mpi_secret_and_rewrites_the_hostfile(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    mpi = runtime(namespace, "mpi-resize", pod_annotations={RUN_FOR: "300s"})
    mpi["spec"]["mlPolicy"] = {"numNodes": 1, "mpi": {"numProcPerNode": 1}}
    node = mpi["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["metadata"] = {}
    launcher = {
        "name": "launcher",
        "template": {
            "metadata": {"labels": {c.ANCESTOR_LABEL: "trainer"}},
            "spec": {
                "backoffLimit": 0,
                "template": {"spec": {"containers": [{"name": "node", "image": "mpi", "command": ["mpirun"]}]}},
            },
        },
    }
    mpi["spec"]["template"]["spec"]["replicatedJobs"] = [launcher, node]
    kube.apply(mpi, trainjob(namespace, "mpi-resized", "mpi-resize", suspend=True, trainer={"numNodes": 1}))
    secret = eventually(lambda: kube.get("secret", "mpi-resized-mpi-ssh-auth", namespace), "the SSH Secret")
    old = eventually(lambda: kube.get("jobset", "mpi-resized", namespace), "the JobSet")
    kube.patch("trainjob", "mpi-resized", namespace, {"spec": {"trainer": {"numNodes": 2}}})
    eventually(
        lambda: (
            (h := kube.get("configmap", "mpi-resized-mpi-hostfile", namespace))
            and h["data"]["hostfile"]
            == "mpi-resized-node-0-0.mpi-resized slots=1\nmpi-resized-node-0-1.mpi-resized slots=1\n"
        ),
        "the hostfile for 2 nodes",
    )
    eventually(
        lambda: (
            (j := kube.get("jobset", "mpi-resized", namespace))
            and j["metadata"]["uid"] != old["metadata"]["uid"]
            and jobset_node(j)["template"]["spec"]["parallelism"] == 2
        ),
        "the JobSet rebuilt for 2 nodes",
        timeout=60,
    )
    kept = kube.get("secret", "mpi-resized-mpi-ssh-auth", namespace)
    assert kept is not None and (kept["metadata"]["uid"], kept["data"]) == (secret["metadata"]["uid"], secret["data"])


def test_restarts_survive_a_recreated_jobset_with_only_the_remaining_budget(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(
        runtime(namespace, "flaky", pod_annotations={EXIT_CODE: "1"}, jobset={"failurePolicy": {"maxRestarts": 6}}),
        trainjob(namespace, "flaky-job", "flaky"),
    )
    eventually(
        lambda: (status_of(kube, namespace, "flaky-job").get("restarts") or 0) >= 1, "a first restart", timeout=90
    )
    kube.delete("jobset", "flaky-job", namespace)
    spent = status_of(kube, namespace, "flaky-job").get("restarts") or 0

    def recreated() -> dict[str, Any] | None:
        jobset = kube.get("jobset", "flaky-job", namespace)
        return jobset if jobset and c.RESTARTS_BEFORE_ANNOTATION in jobset["metadata"].get("annotations", {}) else None

    jobset = eventually(recreated, "a JobSet re-created with the restarts before it", timeout=60)
    before = int(jobset["metadata"]["annotations"][c.RESTARTS_BEFORE_ANNOTATION])
    assert before >= spent >= 1
    assert jobset["spec"]["failurePolicy"]["maxRestarts"] == 6 - before
    failed = eventually(
        lambda: condition(kube.get("trainjob", "flaky-job", namespace), "Failed"), "Failed", timeout=180
    )
    assert failed["status"] == "True"
    final = status_of(kube, namespace, "flaky-job")
    assert final["restarts"] == 6, "the whole budget, not a fresh one: 6 restarts in all"
    header, row = kube.run("get", "trainjob", "flaky-job", "-n", namespace).stdout.splitlines()[:2]
    assert "RESTARTS" in header.split() and row.split()[header.split().index("RESTARTS")] == "6"


def test_startup_deadline_fails_a_job_whose_pods_cannot_be_scheduled(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(
        runtime(
            namespace,
            "nowhere",
            pod_spec={"nodeSelector": {"trainjob-operator.test/none": "x"}},
            runPolicy={"startupDeadlineSeconds": 3},
        ),
        trainjob(namespace, "stuck", "nowhere"),
    )
    failed = eventually(
        lambda: condition(kube.get("trainjob", "stuck", namespace), "Failed"), "StartupDeadlineExceeded", timeout=60
    )
    assert failed["reason"] == "StartupDeadlineExceeded"
    assert (
        failed["message"].startswith("pod stuck-node-0-0-")
        and "did not start within the startup deadline of 3s (Unschedulable: " in failed["message"]
    )
    eventually(lambda: kube.get("jobset", "stuck", namespace) is None, "the JobSet deleted")
    assert status_of(kube, namespace, "stuck")["state"] == "Failed"
