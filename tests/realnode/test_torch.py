"""torch-distributed for real (issue 23, milestone 3): the operator runs a TrainJob of the torch runtime's shape on
2 real nodes x 2 processes; torchrun is configured only by the operator's PET_* env, and every rank reports what
torch itself computed (world size 4, the same all-reduce)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from real_runtimes import finished, real_node_runtime, real_trainjob

from harness import images, realnodes
from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("torch",)

REPO = Path(__file__).resolve().parents[2]

DDP = """
import os, socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank={rank} world={world} node={os.environ['NODE_NAME']} allreduce={value.item():g}", flush=True)
dist.destroy_process_group()
"""


@pytest.mark.realnode_ci
def test_torchrun_two_nodes_two_procs_all_reduce(kube: Kube, operator: OperatorProcess, namespace: str) -> None:
    image = realnodes.load_image(kube.cluster, "torch")
    kube.create(real_node_runtime(image, "torch-real", torch_env=True), namespace)
    created = time.monotonic()
    kube.create(
        real_trainjob(
            "ddp",
            "torch-real",
            numNodes=2,
            numProcPerNode=2,
            command=["bash", "-c", f"cat > /workspace/ddp.py <<'EOF'\n{DDP}\nEOF\nexec torchrun /workspace/ddp.py"],
        ),
        namespace,
    )

    def pods() -> list[dict[str, Any]]:
        return [p for p in kube.items("pods", namespace) if p["metadata"]["name"].startswith("ddp-node-")]

    def all_running() -> bool:
        ps = pods()
        return len(ps) == 2 and all(p["status"].get("phase") in ("Running", "Succeeded") for p in ps)

    eventually(all_running, "both torch pods Running", timeout=180)
    started = time.monotonic()
    job = finished(kube, "ddp", namespace, timeout=300)
    done = time.monotonic()
    logs = {p["metadata"]["name"]: kube.run("logs", "-n", namespace, p["metadata"]["name"]).stdout for p in pods()}
    assert condition(job, "Complete"), (job.get("status"), logs)

    reports = [
        m.groupdict()
        for log in logs.values()
        for m in re.finditer(r"rank=(?P<rank>\d+) world=(?P<world>\d+) node=(?P<node>\S+) allreduce=(?P<sum>\S+)", log)
    ]
    assert sorted(int(r["rank"]) for r in reports) == [0, 1, 2, 3], logs
    assert {r["world"] for r in reports} == {"4"}
    assert {r["sum"] for r in reports} == {"10"}  # 1 + 2 + 3 + 4, computed by gloo across the two nodes
    assert {r["node"] for r in reports} == {"real-node-0", "real-node-1"}
    for pod in pods():
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "2", env
        assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    print(
        f"torch 2x2: pods Running {started - created:.1f}s after the TrainJob was created, "
        f"Complete after {done - created:.1f}s; image {images.metadata('torch')}"
    )
