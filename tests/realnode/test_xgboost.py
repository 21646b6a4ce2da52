"""xgboost-distributed for real (issue 23): a TrainJob of the shipped xgboost-distributed runtime with the XGBoost
image built here (Debian's python3-xgboost 1.7.4), on the 2 real nodes. Worker 0 runs the rabit tracker where the
operator's DMLC_TRACKER_URI/DMLC_TRACKER_PORT point; both workers join the collective from the operator's DMLC_*
env and train on their own shard. What XGBoost reports: the collective's rank and world size, and both workers
hold the same model (the same bytes) with the same training error over all the data."""

from __future__ import annotations

import re

import pytest
from framework_runtimes import framework_reports, run_framework_example

from harness import images
from operator_fixtures import Kube, OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("xgboost",)


REPORT = re.compile(r"xgboost rank=(\d+) world=(\d+) model=(\S+) rmse=(\S+) node=(\S+)")


def test_xgboost_workers_form_the_collective_and_train_one_model(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    run = run_framework_example(
        kube,
        namespace,
        image="xgboost",
        runtime_file="xgboost-distributed.yaml",
        example="xgboost-example",
        name="xgb",
        timeout=300,
    )

    reports = framework_reports(run, REPORT)
    assert [(r[0], r[1]) for r in reports] == [("0", "2"), ("1", "2")], run.logs
    assert len({r[2] for r in reports}) == 1, reports  # the same model on both workers
    assert len({r[3] for r in reports}) == 1, reports  # its error over both shards, allreduced
    assert {r[4] for r in reports} == {"real-node-0", "real-node-1"}
    print(
        f"xgboost 2 workers: Complete {run.seconds:.1f}s after the TrainJob was created; {images.metadata('xgboost')}"
    )
