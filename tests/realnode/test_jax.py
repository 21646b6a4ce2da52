"""jax-distributed for real (issue 23): a TrainJob of the shipped jax-distributed runtime (uid 1000, restricted
security contexts) with the JAX (CPU) image built here, on the 2 real nodes. The program is examples/frameworks.yaml's
`jax-example`: `jax.distributed.initialize` takes the coordinator, process count and id from the operator's JAX_*
env only; every process reports JAX's own
process count and global device count, and the sum a `psum` computed across the processes (gloo, over the pod
network)."""

from __future__ import annotations

import re

import pytest
from framework_runtimes import framework_reports, run_framework_example

from harness import images
from operator_fixtures import Kube, OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("jax",)

REPORT = re.compile(r"jax process=(\d+) count=(\d+) devices=(\d+) sum=(\S+) node=(\S+)")


def test_jax_processes_across_two_nodes_sum_together(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    run = run_framework_example(
        kube,
        namespace,
        image="jax",
        runtime_file="jax-distributed.yaml",
        example="jax-example",
        name="jax",
        timeout=300,
    )

    reports = framework_reports(run, REPORT)
    # What JAX itself says: 2 processes, 2 CPU devices in all, and 1 + 2 summed across them; one per node.
    assert [r[:4] for r in reports] == [("0", "2", "2", "3"), ("1", "2", "2", "3")], run.logs
    assert {r[4] for r in reports} == {"real-node-0", "real-node-1"}
    env = {e["name"]: e.get("value") for e in next(iter(run.pods.values()))["spec"]["containers"][0]["env"]}
    assert env["JAX_COORDINATOR_ADDRESS"] == "jax-node-0-0.jax:29500", env
    print(f"jax 2 processes: Complete {run.seconds:.1f}s after the TrainJob was created; {images.metadata('jax')}")
