"""A torch trainer cut into bounded Jobs, for real (issue 37, `trainer.kubeflow.org/max-nodes-per-job`): numNodes 4
at most 2 per Job runs 2 Jobs of 2 pods across the 2 real nodes; torchrun is configured only by the operator's
PET_* env (PET_NODE_RANK computed by the rank line around the command), and each worker prints the rank and world
size torch.distributed computed after its rendezvous: ranks 0..3 once each, world 4, each pod's rank its place in
the cut (job index x 2 + completion index)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from real_runtimes import finished, real_node_runtime, real_trainjob

from harness import realnodes
from operator_fixtures import Kube, OperatorProcess, condition
from trainjob_operator.api import constants as c

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("torch",)

NAME, NODES, PER_JOB = "cut", 4, 2
REPORT = re.compile(r"rank=(?P<rank>\d+) world=(?P<world>\d+) host=(?P<host>\S+) node=(?P<node>\S+) sum=(?P<sum>\S+)")
DDP = """
import os, socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank={rank} world={world} host={socket.gethostname()} node={os.environ['NODE_NAME']} sum={value.item():g}",
      flush=True)
dist.destroy_process_group()
"""


def test_a_cut_torch_trainer_ranks_every_worker_once_across_the_real_nodes(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    image = realnodes.load_image(kube.cluster, "torch")
    kube.create(real_node_runtime(image, "torch-cut", torch_env=True), namespace)
    trainjob = real_trainjob(
        NAME,
        "torch-cut",
        numNodes=NODES,
        numProcPerNode=1,
        command=["bash", "-c", f"cat > /workspace/ddp.py <<'EOF'\n{DDP}\nEOF\nexec torchrun /workspace/ddp.py"],
    )
    trainjob["metadata"]["annotations"] = {c.MAX_NODES_PER_JOB_ANNOTATION: str(PER_JOB)}
    created = time.monotonic()
    kube.create(trainjob, namespace)

    def pods() -> list[dict[str, Any]]:
        return [p for p in kube.items("pods", namespace) if p["metadata"]["name"].startswith(f"{NAME}-node-")]

    job = finished(kube, NAME, namespace, timeout=120)
    done = time.monotonic()
    logs = {p["metadata"]["name"]: kube.run("logs", "-n", namespace, p["metadata"]["name"]).stdout for p in pods()}
    assert condition(job, "Complete"), (job.get("status"), logs)
    node_job = next(r for r in kube.get("jobset", NAME, namespace)["spec"]["replicatedJobs"] if r["name"] == c.NODE)
    assert (node_job["replicas"], node_job["template"]["spec"]["parallelism"]) == (NODES // PER_JOB, PER_JOB)

    reports = [m.groupdict() for log in logs.values() for m in REPORT.finditer(log)]
    assert sorted(int(r["rank"]) for r in reports) == list(range(NODES)), logs
    assert {r["world"] for r in reports} == {str(NODES)}
    assert {r["sum"] for r in reports} == {str(NODES * (NODES + 1) // 2)}, "gloo's all-reduce over all 4 ranks"
    assert {r["node"] for r in reports} == {"real-node-0", "real-node-1"}
    for report in reports:  # the host JobSet named `<tj>-node-<job index>-<completion index>`
        job_index, completion = (int(x) for x in report["host"].rsplit("-", 2)[1:])
        assert int(report["rank"]) == job_index * PER_JOB + completion, report
    print(f"torch cut 2 Jobs x 2 on the real nodes: Complete {done - created:.1f}s after the TrainJob was created")
