"""xgboost-distributed for real (issue 23): a TrainJob of the shipped xgboost-distributed runtime with the XGBoost
image built here (Debian's python3-xgboost 1.7.4), on the 2 real nodes. Worker 0 runs the rabit tracker where the
operator's DMLC_TRACKER_URI/DMLC_TRACKER_PORT point; both workers join the collective from the operator's DMLC_*
env and train on their own shard. What XGBoost reports: the collective's rank and world size, and both workers
hold the same model (the same bytes) with the same training error over all the data."""

from __future__ import annotations

import re

import pytest
from framework_runtimes import real_node_framework_runtime, run_to_end
from real_runtimes import real_trainjob

from operator_fixtures import Kube, OperatorProcess
from trainjob_dev import images, realnodes

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

PROGRAM = """
import hashlib, os
import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

rank, workers = int(os.environ["DMLC_TASK_ID"]), int(os.environ["DMLC_NUM_WORKER"])
port = int(os.environ["DMLC_TRACKER_PORT"])
if rank == 0:
    tracker = RabitTracker(host_ip="0.0.0.0", n_workers=workers, port=port, sortby="task")
    tracker.start(workers)
args = {"DMLC_TRACKER_URI": os.environ["DMLC_TRACKER_URI"], "DMLC_TRACKER_PORT": port,
        "DMLC_TASK_ID": str(rank), "DMLC_NUM_WORKER": workers}
with collective.CommunicatorContext(**args):
    rng = np.random.default_rng(rank)
    x = rng.normal(size=(2000, 4))
    y = x @ np.array([1.0, -2.0, 0.5, 3.0]) + rng.normal(scale=0.1, size=2000)
    data, evals = xgb.DMatrix(x, y), {}
    booster = xgb.train({"tree_method": "hist", "max_depth": 3, "eta": 0.3, "nthread": 1}, data,
                        num_boost_round=10, evals=[(data, "train")], evals_result=evals, verbose_eval=False)
    print(f"xgboost rank={collective.get_rank()} world={collective.get_world_size()} "
          f"model={hashlib.sha256(booster.save_raw('json')).hexdigest()[:16]} "
          f"rmse={evals['train']['rmse'][-1]:.4f} node={os.environ['NODE_NAME']}", flush=True)
if rank == 0:
    tracker.join()
"""

REPORT = re.compile(r"xgboost rank=(\d+) world=(\d+) model=(\S+) rmse=(\S+) node=(\S+)")


def test_xgboost_workers_form_the_collective_and_train_one_model(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    image = realnodes.load_image(kube.cluster, "xgboost")
    kube.create(real_node_framework_runtime("xgboost-distributed.yaml", image, "xgboost-real"), namespace)
    run = run_to_end(
        kube, namespace, real_trainjob("xgb", "xgboost-real", numNodes=2, command=["python3", "-c", PROGRAM]), 300
    )
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
