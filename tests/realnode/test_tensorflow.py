"""tensorflow-distributed for real (issue 23): a TrainJob of the shipped tensorflow-distributed runtime with the
TensorFlow (CPU) image built here, on the 2 real nodes. MultiWorkerMirroredStrategy reads only the TF_CONFIG the
operator wrote (every worker's stable host name, this pod's task index); each worker reports the strategy's
replica count, the cluster it joined and an all-reduce across the two pods."""

from __future__ import annotations

import json
import re

import pytest
from framework_runtimes import real_node_framework_runtime, run_to_end
from real_runtimes import real_trainjob

from operator_fixtures import Kube, OperatorProcess
from trainjob_dev import images, realnodes

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

PROGRAM = """
import json, os
import tensorflow as tf

task = json.loads(os.environ["TF_CONFIG"])["task"]
strategy = tf.distribute.MultiWorkerMirroredStrategy()

def replica_value():
    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(task["index"] + 1)))

total = strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(replica_value), axis=None)
workers = strategy.cluster_resolver.cluster_spec().as_dict()["worker"]
print(f"tensorflow task={task['type']}:{task['index']} replicas={strategy.num_replicas_in_sync} "
      f"workers={','.join(workers)} allreduce={float(total):g} node={os.environ['NODE_NAME']}", flush=True)
"""

REPORT = re.compile(r"tensorflow task=(\S+) replicas=(\d+) workers=(\S+) allreduce=(\S+) node=(\S+)")


def test_tensorflow_multi_worker_mirrored_across_two_pods(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    image = realnodes.load_image(kube.cluster, "tensorflow")
    kube.create(real_node_framework_runtime("tensorflow-distributed.yaml", image, "tf-real"), namespace)
    run = run_to_end(
        kube, namespace, real_trainjob("tf", "tf-real", numNodes=2, command=["python3", "-c", PROGRAM]), 420
    )
    assert run.complete(), (run.job.get("status"), run.logs)
    run.assert_ran_for_real()

    workers = "tf-node-0-0.tf:29500,tf-node-0-1.tf:29500"
    reports = sorted(m.groups() for log in run.logs.values() for m in REPORT.finditer(log))
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
