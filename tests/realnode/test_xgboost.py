"""xgboost-distributed for real (issue 23): a TrainJob of the shipped xgboost-distributed runtime with the XGBoost
image built here (Debian's python3-xgboost 1.7.4), on the 2 real nodes. Worker 0 runs the rabit tracker where the
operator's DMLC_TRACKER_URI/DMLC_TRACKER_PORT point; both workers join the collective from the operator's DMLC_*
env and train on their own shard. What XGBoost reports: the collective's rank and world size, and both workers
hold the same model (the same bytes) with the same training error over all the data."""

from __future__ import annotations

import re

import pytest
from framework_runtimes import example_trainjob, real_node_framework_runtime, run_to_end

from operator_fixtures import Kube, OperatorProcess
from trainjob_dev import images, realnodes

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]


REPORT = re.compile(r"xgboost rank=(\d+) world=(\d+) model=(\S+) rmse=(\S+) node=(\S+)")


def test_xgboost_workers_form_the_collective_and_train_one_model(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    image = realnodes.load_image(kube.cluster, "xgboost")
    kube.create(real_node_framework_runtime("xgboost-distributed.yaml", image, "xgboost-real"), namespace)
    run = run_to_end(kube, namespace, example_trainjob("xgboost-example", "xgb", "xgboost-real"), 300)
    assert run.complete(), (run.job.get("status"), run.logs)
    run.assert_ran_for_real()

    reports = sorted(m.groups() for log in run.logs.values() for m in REPORT.finditer(log))
    assert [(r[0], r[1]) for r in reports] == [("0", "2"), ("1", "2")], run.logs
    assert len({r[2] for r in reports}) == 1, reports  # the same model on both workers
    assert len({r[3] for r in reports}) == 1, reports  # its error over both shards, allreduced
    assert {r[4] for r in reports} == {"real-node-0", "real-node-1"}
    print(
        f"xgboost 2 workers: Complete {run.seconds:.1f}s after the TrainJob was created; {images.metadata('xgboost')}"
    )
