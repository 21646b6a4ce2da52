"""tensorflow-distributed for real (issue 23): a TrainJob of the shipped tensorflow-distributed runtime with the
TensorFlow (CPU) image built here, on the 2 real nodes. MultiWorkerMirroredStrategy reads only the TF_CONFIG the
operator wrote (every worker's stable host name, this pod's task index); each worker reports the strategy's
replica count, the cluster it joined and an all-reduce across the two pods."""

from __future__ import annotations

import json
import re

import pytest
from framework_runtimes import framework_reports, run_framework_example

from harness import images
from operator_fixtures import Kube, OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("tensorflow",)


REPORT = re.compile(r"tensorflow task=(\S+) replicas=(\d+) workers=(\S+) allreduce=(\S+) node=(\S+)")


def test_tensorflow_multi_worker_mirrored_across_two_pods(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    run = run_framework_example(
        kube,
        namespace,
        image="tensorflow",
        runtime_file="tensorflow-distributed.yaml",
        example="tensorflow-example",
        name="tf",
        timeout=420,
    )

    workers = "tf-node-0-0.tf:29500,tf-node-0-1.tf:29500"
    reports = framework_reports(run, REPORT)
    assert [r[:4] for r in reports] == [
        ("worker:0", "2", workers, "3"),
        ("worker:1", "2", workers, "3"),
    ], run.logs
    assert {r[4] for r in reports} == {"real-node-0", "real-node-1"}
    for pod in run.pods.values():
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert json.loads(env["TF_CONFIG"].replace("$(TF_TASK_INDEX)", "0"))["cluster"]["worker"] == workers.split(",")
    print(
        f"tensorflow 2 workers: Complete {run.seconds:.1f}s after the TrainJob was created; {images.metadata('tensorflow')}"
    )
