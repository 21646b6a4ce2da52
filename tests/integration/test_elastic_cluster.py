"""Elastic PyTorch (issue 34) on the real API server, JobSet controller, scheduler and kwok nodes: a user's numNodes
edit of a running elastic TrainJob. With JobSet's ElasticJobSet gate on (TRAINJOB_JOBSET_FEATURE_GATES before the
session's cluster starts) the operator resizes the running JobSet and its Job, with an Event; with the gate off
(JobSet v0.12's default) JobSet refuses and the TrainJob says it runs fixed-size, once. Which one the session has is
read from the environment the cluster was started with."""

from __future__ import annotations

import os
from typing import Any

import pytest

from operator_fixtures import Kube, OperatorProcess, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

RUN_FOR = "trainjob-operator.test/run-for"
GATE_ON = "elasticjobset=true" in os.environ.get("TRAINJOB_JOBSET_FEATURE_GATES", "").lower().replace(" ", "")


def elastic_runtime(namespace: str) -> dict[str, Any]:
    pod = {
        "metadata": {"annotations": {RUN_FOR: "600s"}},
        "spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0", "command": ["torchrun", "t.py"]}]},
    }
    rjob = {
        "name": "node",
        "template": {
            "metadata": {"labels": {c.ANCESTOR_LABEL: "trainer"}},
            "spec": {"backoffLimit": 3, "template": pod},
        },
    }
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": {"name": "elastic", "namespace": namespace},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [rjob]}}},
    }


def elastic_of(kube: Kube, namespace: str) -> dict[str, Any]:
    return dict(((kube.get("trainjob", "grow", namespace) or {}).get("status") or {}).get("elastic") or {})


def trainer_pods(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.items("pods", namespace)
        if p["metadata"].get("labels", {}).get(c.JOBSET_NAME_LABEL) == "grow"
        and not p["metadata"].get("deletionTimestamp")
    ]


def test_a_users_numnodes_edit_resizes_a_running_elastic_trainjob_or_says_why_not(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(elastic_runtime(namespace))
    kube.apply(
        {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": "grow", "namespace": namespace},
            "spec": {
                "runtimeRef": {"name": "elastic", "kind": "TrainingRuntime"},
                "trainer": {"numNodes": 1, "elasticPolicy": {"minNodes": 1, "maxNodes": 3}},
            },
        }
    )
    eventually(lambda: len(trainer_pods(kube, namespace)) == 1, "one trainer pod", timeout=90)
    service = kube.get("service", "grow-rdzv", namespace)
    assert service is not None and service["spec"]["clusterIP"] == "None"
    eventually(lambda: elastic_of(kube, namespace).get("currentNodes") == 1, "status.elastic", timeout=60)

    kube.run("patch", "trainjob", "grow", "-n", namespace, "--type=merge", "-p", '{"spec":{"trainer":{"numNodes":3}}}')
    if GATE_ON:
        eventually(lambda: len(trainer_pods(kube, namespace)) == 3, "three trainer pods", timeout=90)
        job = kube.get("job", "grow-node-0", namespace) or {}
        assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (3, 3)
        eventually(lambda: elastic_of(kube, namespace).get("currentNodes") == 3, "3 nodes in the status", 60)
        elastic = elastic_of(kube, namespace)
        assert (elastic["desiredNodes"], elastic["resizes"], elastic["scaling"]) == (3, 1, "Enabled")
        reasons = ["ElasticScaleUp"]
    else:
        eventually(
            lambda: elastic_of(kube, namespace).get("scaling") == "Unavailable", "scaling Unavailable", timeout=60
        )
        elastic = elastic_of(kube, namespace)
        assert "ElasticJobSet" in elastic["message"] and elastic["desiredNodes"] == 1, elastic
        assert len(trainer_pods(kube, namespace)) == 1
        reasons = ["ElasticScalingUnavailable"]
    events = [
        e["reason"]
        for e in kube.items("events", namespace)
        if e["involvedObject"].get("name") == "grow" and e["reason"].startswith("Elastic")
    ]
    assert events == reasons, events
    # Outside the bounds, the webhook refuses the edit.
    refused = kube.run(
        "patch",
        "trainjob",
        "grow",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"trainer":{"numNodes":4}}}',
        check=False,
    )
    assert refused.returncode != 0
    assert "must be between elasticPolicy minNodes (1) and maxNodes (3)" in refused.stderr
