"""MPI over SSH for real (issue 23): the operator runs a TrainJob of the shipped deepspeed-distributed shape (a
launcher that is also a node, plus 2 node pods running a non-root sshd on 2222) with an Open MPI image built here.
`mpirun`, configured only by what the operator gives the launcher (the SSH key Secret, the hostfile at
/etc/mpi/hostfile, the OMPI_MCA_* env), starts every rank over SSH; mpirun's own map and every rank report the
expected host and slot, and an mpi4py allreduce agrees across the ranks and the real nodes."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from real_runtimes import finished, real_node_mpi_runtime, real_trainjob

from harness import images, realnodes
from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("mpi",)

NAME = "mpi"
SLOTS = 2
#: numNodes counts the launcher (runLauncherAsNode): a launcher and 2 node pods.
NUM_NODES = 3

RANK = """
import os, socket
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
total = comm.allreduce(rank + 1, op=MPI.SUM)
print(f"rank={rank} size={comm.Get_size()} host={socket.gethostname()} "
      f"slot={os.environ['OMPI_COMM_WORLD_LOCAL_RANK']} allreduce={total}", flush=True)
"""


@pytest.mark.realnode_ci
def test_mpirun_over_ssh_places_every_rank_and_allreduces(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    image = realnodes.load_image(kube.cluster, "mpi")
    kube.create(real_node_mpi_runtime(image, "mpi-real"), namespace)
    created = time.monotonic()
    # The launcher command shape of the MPI runtimes: mpirun and the program, nothing else; where and how many
    # comes from the operator's hostfile and OMPI_MCA_* env.
    command = ["mpirun", "--display-map", "python3", "-c", RANK]
    kube.create(real_trainjob(NAME, "mpi-real", numNodes=NUM_NODES, numProcPerNode=SLOTS, command=command), namespace)

    def pods() -> dict[str, dict[str, Any]]:
        return {
            p["spec"].get("hostname", ""): p
            for p in kube.items("pods", namespace)
            if p["metadata"]["name"].startswith(f"{NAME}-")
        }

    def all_running() -> bool:
        ps = pods()
        return len(ps) == NUM_NODES and all(p["status"].get("phase") in ("Running", "Succeeded") for p in ps.values())

    eventually(all_running, "the launcher and both node pods Running", timeout=240)
    running = time.monotonic()
    # Where they ran, read while they run: once the launcher completes, JobSet deletes the node pods, and on a loaded
    # machine they can be gone before the listing after Complete (seen under load 15).
    while_running = pods()
    job = finished(kube, NAME, namespace, timeout=300)
    done = time.monotonic()
    placed = pods()
    launcher = placed[f"{NAME}-launcher-0-0"]
    log = kube.run("logs", "-n", namespace, launcher["metadata"]["name"]).stdout
    assert condition(job, "Complete"), (job.get("status"), log)

    # The operator's hostfile: node pods first, then the launcher (the runtime's job order), SLOTS each.
    hostfile = kube.get("configmap", f"{NAME}-mpi-hostfile", namespace)
    assert hostfile is not None
    hosts = [f"{NAME}-node-0-0", f"{NAME}-node-0-1", f"{NAME}-launcher-0-0"]
    assert hostfile["data"]["hostfile"] == "".join(f"{h}.{NAME} slots={SLOTS}\n" for h in hosts)
    # Open MPI maps by slot, starting with the node mpirun itself runs on (its own daemon is the first of the
    # allocation, and a hostfile line naming this pod is that node): the launcher's slots hold ranks 0 and 1, then
    # the other hosts in hostfile order.
    in_map_order = [hosts[2], hosts[0], hosts[1]]
    expected = {rank: (in_map_order[rank // SLOTS], rank % SLOTS) for rank in range(len(hosts) * SLOTS)}

    # mpirun's own map (--display-map): each host of the hostfile with its slots and its ranks.
    mapped: dict[int, str] = {}
    for block in re.split(r"Data for node: ", log)[1:]:
        host = block.split()[0].split(".")[0]
        assert re.search(rf"Num slots: {SLOTS}\b", block), block
        for rank in re.findall(r"Process rank: (\d+)", block.split("\n\n")[0]):
            mapped[int(rank)] = host
    assert mapped == {rank: host for rank, (host, _) in expected.items()}, log

    # What every rank itself reports: its host, its slot there, the world size and the allreduce over TCP.
    reports = {
        int(m["rank"]): m.groupdict()
        for m in re.finditer(
            r"rank=(?P<rank>\d+) size=(?P<size>\d+) host=(?P<host>\S+) slot=(?P<slot>\d+) allreduce=(?P<sum>\d+)",
            log,
        )
    }
    assert {rank: (r["host"], int(r["slot"])) for rank, r in reports.items()} == expected, log
    assert {r["size"] for r in reports.values()} == {str(len(expected))}
    assert {r["sum"] for r in reports.values()} == {str(sum(range(1, len(expected) + 1)))}

    # Really across nodes, in containerd: the node pods one per real node.
    assert {while_running[h]["spec"]["nodeName"] for h in hosts[:2]} == {"real-node-0", "real-node-1"}
    for pod in while_running.values():
        assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    print(
        f"mpi launcher + 2 nodes x {SLOTS} slots: pods Running {running - created:.1f}s after the TrainJob was "
        f"created, Complete after {done - created:.1f}s; image {images.metadata('mpi')}"
    )
