"""Identity is the uid, on a real kube-apiserver (issue 28): a TrainJob deleted and applied again under its name
while the garbage collector is held back (the kube-controller-manager of this test's own cluster stopped with
SIGSTOP, as a busy one is late) never inherits its predecessor's JobSet, status, runtime snapshot or MPI Secret: it
waits, saying why (a Pending condition, an Event), deletes what the predecessor left (only those incarnations), and
once the collector has run it builds and completes on its own children."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import torch_runtime, trainjob_object
from cluster_fixtures import garbage_collector_held
from operator_fixtures import Kube, OperatorProcess, condition, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

RUNTIMES = Path(__file__).resolve().parents[2] / "runtimes"
PENDING, WAITING_FOR_PREVIOUS = "Pending", "WaitingForPreviousTrainJob"
"""c.CONDITION_PENDING and c.REASON_PREVIOUS_TRAINJOB, spelled out so the test also runs against the code before
issue 28 (where it fails: the new TrainJob finishes with its predecessor's state)."""


def owner_uid(obj: dict[str, Any] | None) -> str | None:
    owners = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return next((o.get("uid") for o in owners if o.get("controller")), None)


def node_image(jobset: dict[str, Any]) -> str:
    rjob = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == c.NODE)
    ctr = next(x for x in rjob["template"]["spec"]["template"]["spec"]["containers"] if x["name"] == c.NODE)
    return str(ctr["image"])


def mpi_runtime() -> dict[str, Any]:
    runtime: dict[str, Any] = yaml.safe_load((RUNTIMES / "deepspeed-distributed.yaml").read_text())
    return runtime


CASES = {
    "torch": (lambda ns: torch_runtime(ns), "torch", "TrainingRuntime", ("again-runtime-snapshot",), ()),
    "mpi": (
        lambda ns: mpi_runtime(),
        "deepspeed-distributed",
        "ClusterTrainingRuntime",
        ("again-runtime-snapshot", "again-mpi-hostfile"),
        ("again-mpi-ssh-auth",),
    ),
}


@pytest.mark.parametrize("framework", CASES, ids=CASES.keys())
def test_a_trainjob_applied_again_under_its_name_never_inherits_its_predecessor(
    kube: Kube, operator: OperatorProcess, namespace: str, cluster: Any, framework: str
) -> None:
    make_runtime, runtime_name, runtime_kind, configmaps, secrets = CASES[framework]

    def train(image: str) -> dict[str, Any]:
        job = trainjob_object(namespace, "again", runtime_name, trainer={"image": image, "numNodes": 2})
        job["spec"]["runtimeRef"]["kind"] = runtime_kind
        return job

    kube.apply(make_runtime(namespace))
    kube.apply(train("user/train:v2"))
    eventually(lambda: condition(kube.get("trainjob", "again", namespace), "Complete"), "v2 Complete", timeout=120)
    old = kube.get("trainjob", "again", namespace)
    assert old is not None
    old_uid = old["metadata"]["uid"]

    before = {}
    for kind, names in (("configmap", configmaps), ("secret", secrets)):
        for name in names:
            found = kube.get(kind, name, namespace)
            assert found is not None and owner_uid(found) == old_uid
            before[(kind, name)] = (found["metadata"]["uid"], found["metadata"]["resourceVersion"])

    with garbage_collector_held(cluster):
        kube.run("delete", "trainjob", "again", "-n", namespace, "--wait=true")
        kube.apply(train("user/train:v3"))
        new = kube.get("trainjob", "again", namespace)
        assert new is not None and new["metadata"]["uid"] != old_uid
        new_uid = new["metadata"]["uid"]
        seen = eventually(
            lambda: (lambda tj: condition(tj, PENDING) or condition(tj, "Complete") or condition(tj, "Failed"))(
                kube.get("trainjob", "again", namespace)
            ),
            "the new TrainJob reconciled: waiting, or (the bug) finished with its predecessor's status",
            timeout=30,
        )
        assert seen["type"] == PENDING, f"the new TrainJob inherited its predecessor's state: {seen}"
        waiting = seen
        assert waiting["reason"] == WAITING_FOR_PREVIOUS
        assert old_uid in waiting["message"]
        # The collector is stopped: the predecessor's JobSet is still there (deleted in the foreground, waiting
        # for the collector), and nothing of it reached the new TrainJob.
        jobset = kube.get("jobset", "again", namespace)
        assert jobset is not None and owner_uid(jobset) == old_uid
        assert jobset["metadata"].get("deletionTimestamp"), "the operator deleted the predecessor's JobSet"
        current = kube.get("trainjob", "again", namespace) or {}
        assert condition(current, "Complete") is None and condition(current, "Failed") is None
        assert (current.get("status") or {}).get("state") == c.STATE_PENDING
        for (kind, name), (uid, version) in before.items():  # gone, or untouched: never adopted nor patched
            found = kube.get(kind, name, namespace)
            if found is not None and found["metadata"]["uid"] == uid:
                assert found["metadata"]["resourceVersion"] == version, f"{kind} {name} of the predecessor patched"
                assert owner_uid(found) == old_uid, f"{kind} {name} of the predecessor adopted"
        events = [
            e
            for e in kube.items("events", namespace)
            if e["involvedObject"].get("uid") == new_uid and e["reason"] == WAITING_FOR_PREVIOUS
        ]
        assert events and events[0]["type"] == "Normal"

    jobset = eventually(
        lambda: (lambda js: js if js is not None and owner_uid(js) == new_uid else None)(
            kube.get("jobset", "again", namespace)
        ),
        "the new TrainJob's own JobSet once the collector ran",
        timeout=120,
    )
    assert node_image(jobset) == "user/train:v3"
    done = eventually(
        lambda: condition(kube.get("trainjob", "again", namespace), "Complete"), "v3 Complete", timeout=120
    )
    final = kube.get("trainjob", "again", namespace) or {}
    assert done["lastTransitionTime"] >= final["metadata"]["creationTimestamp"]
    assert condition(final, PENDING) is None, "the Pending condition is dropped once the wait is over"
    for (kind, name), (uid, _) in before.items():
        found = kube.get(kind, name, namespace)
        assert found is not None and found["metadata"]["uid"] != uid, f"{kind} {name}: a new one"
        assert owner_uid(found) == new_uid, f"{kind} {name} is the new TrainJob's own"
