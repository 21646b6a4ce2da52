"""Kueue's topology-aware scheduling (TAS) through our operator: the kwok nodes carry a block/rack/host topology
(`cluster.up(topology=True)`, on whenever the session runs Kueue), a Topology and a ResourceFlavor name it, and a
TrainJob asks for a required or a preferred topology level on each replicatedJob's pod template (a runtimePatch;
Kueue takes one topology annotation per pod template).
Kueue admits it, writes its runtimePatch (labels, annotations, nodeSelector, tolerations and the
`kueue.x-k8s.io/topology` scheduling gate); every pod must carry all of it plus the Job/JobSet index labels, and
Kueue's ungater must place each pod on the host its rank (completion index) was given."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import (
    FLAVOR_LABELS,
    KUEUE_MANAGER,
    QUEUE_LABEL,
    RUN_FOR,
    get,
    gpu_queue,
    kueue_object,
    kwok_patch,
    pods,
    trainjob,
)

from harness.cluster import TOPOLOGY_LEVELS
from operator_fixtures import Kube, OperatorProcess, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.kueue, pytest.mark.timeout(240)]

BLOCK, RACK, HOST = TOPOLOGY_LEVELS
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
FLAVOR_TOLERATION = {"key": "trainjob-operator.test/tas", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def tas_queue(kube: Kube, namespace: str, operator: OperatorProcess, default_runtimes: list[str]) -> Iterator[str]:
    """A Topology over the nodes' block/rack/host labels, a GPU ResourceFlavor naming it, a ClusterQueue with the
    whole cluster's 32 GPUs and a LocalQueue in the test namespace."""
    topology = f"e2e-topo-{uuid.uuid4().hex[:6]}"
    levels = {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]}
    with gpu_queue(
        kube,
        namespace,
        "tas",
        gpus=32,
        # The toleration (of a taint no node has) makes Kueue write tolerations into its runtimePatch too.
        flavor_spec={"nodeLabels": FLAVOR_LABELS, "topologyName": topology, "tolerations": [FLAVOR_TOLERATION]},
        extra=[kueue_object("Topology", topology, spec=levels)],
    ) as queue:
        yield queue


def hosts_by_rank(assignment: dict[str, Any]) -> list[str]:
    """Kueue v1beta2's compressed TopologyAssignment expanded to the host of each rank: slices of domains, each
    level's values either universal or prefix + root + suffix per domain, pod counts universal or per domain."""
    host_level = assignment["levels"].index(HOST)
    ranks: list[str] = []
    for piece in assignment["slices"]:
        counts = piece["podCounts"]
        level = piece["valuesPerLevel"][host_level]
        for i in range(piece["domainCount"]):
            if "universal" in level:
                host = level["universal"]
            else:
                values = level["individual"]
                host = values.get("prefix", "") + values["roots"][i] + values.get("suffix", "")
            count = counts["universal"] if "universal" in counts else counts["individual"][i]
            ranks += [host] * count
    return ranks


def pod_template_patch(patch: dict[str, Any], rjob: str) -> dict[str, Any]:
    for entry in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
        if entry["name"] == rjob:
            template: dict[str, Any] = entry["template"]["spec"]["template"]
            return template
    raise AssertionError(f"Kueue's runtimePatch has no replicatedJob {rjob!r}")


def assert_placed_as_kueue_decided(kube: Kube, namespace: str, name: str, rjobs: dict[str, int]) -> None:
    """Every pod of each replicatedJob (name -> pod count) runs on the host Kueue assigned to its rank, carries
    Kueue's runtimePatch unchanged and the index labels, and is no longer gated; the JobSet's template kept the gate
    Kueue asked for (so the pods were created gated and Kueue removed it)."""
    running = eventually(
        lambda: (
            ps
            if len(ps := [p for p in pods(kube, namespace, name) if p["status"].get("phase") == "Running"])
            == sum(rjobs.values())
            else None
        ),
        f"all {sum(rjobs.values())} pods of {name} running",
        timeout=120,
    )
    job = get(kube, "trainjob", name, namespace)
    kueue_patch = {p["manager"]: p for p in job["spec"]["runtimePatches"]}[KUEUE_MANAGER]
    workload = next(
        w
        for w in kube.items("workloads", namespace)
        if w["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    )
    assignments = {a["name"]: a for a in workload["status"]["admission"]["podSetAssignments"]}
    jobset = get(kube, "jobset", name, namespace)
    for rjob, count in rjobs.items():
        expected_hosts = hosts_by_rank(assignments[rjob]["topologyAssignment"])
        assert len(expected_hosts) == count, (rjob, expected_hosts)
        patch = pod_template_patch(kueue_patch, rjob)
        assert {"name": TOPOLOGY_GATE} in patch["spec"]["schedulingGates"], patch
        # Something of every kind Kueue writes, so the subset checks below compare something.
        assert patch["metadata"]["labels"] and patch["metadata"]["annotations"], patch
        assert patch["spec"]["nodeSelector"] == FLAVOR_LABELS and FLAVOR_TOLERATION in patch["spec"]["tolerations"]
        template = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == rjob)["template"]["spec"][
            "template"
        ]
        assert {"name": TOPOLOGY_GATE} in template["spec"]["schedulingGates"], "the JobSet lost Kueue's gate"
        mine = sorted(
            (p for p in running if p["metadata"]["labels"][RJOB_NAME] == rjob),
            key=lambda p: int(p["metadata"]["labels"][COMPLETION_INDEX]),
        )
        placed = []
        for pod in mine:
            labels, annotations, spec = pod["metadata"]["labels"], pod["metadata"]["annotations"], pod["spec"]
            rank = int(labels[COMPLETION_INDEX]) + int(labels[JOB_INDEX]) * count
            placed.append((rank, spec["nodeName"]))
            assert spec["nodeSelector"][HOST] == spec["nodeName"], pod["metadata"]["name"]
            assert not spec.get("schedulingGates"), f"{pod['metadata']['name']} still gated"
            assert labels.items() >= (patch["metadata"].get("labels") or {}).items()
            assert annotations.items() >= (patch["metadata"].get("annotations") or {}).items()
            assert spec["nodeSelector"].items() >= (patch["spec"].get("nodeSelector") or {}).items()
            for toleration in patch["spec"]["tolerations"]:
                assert toleration in spec["tolerations"], toleration
        assert placed == list(enumerate(expected_hosts)), f"{rjob}: pods by rank {placed}, Kueue's {expected_hosts}"
        nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kube.items("nodes", "default")}
        assert len({nodes[host][BLOCK] for host in expected_hosts}) == 1, "the required block was not kept"


def topology_patch(requests: dict[str, tuple[str, str]], run_for: str) -> dict[str, Any]:
    """replicatedJob -> (REQUIRED or PREFERRED, level)."""
    return kwok_patch({rjob: {RUN_FOR: run_for, kind: level} for rjob, (kind, level) in requests.items()})


@pytest.mark.parametrize("request_", [(REQUIRED, BLOCK), (PREFERRED, RACK)], ids=["required-block", "preferred-rack"])
def test_torch_pods_are_placed_by_rank_as_kueue_decided(
    kube: Kube, namespace: str, tas_queue: str, request_: tuple[str, str]
) -> None:
    # 3 nodes of 8 GPUs on hosts of 8: one pod per host, more than a rack (2 hosts) holds, so a preferred rack is
    # given up for the block and a required block is kept.
    kube.apply(
        trainjob(
            "tas-torch",
            "torch-distributed",
            labels={QUEUE_LABEL: tas_queue},
            trainer={"numNodes": 3, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}},
            runtimePatches=[topology_patch({"node": request_}, "60s")],
        ),
        namespace=namespace,
    )
    assert_placed_as_kueue_decided(kube, namespace, "tas-torch", {"node": 3})


def test_mpi_launcher_and_nodes_are_placed_by_rank(kube: Kube, namespace: str, tas_queue: str) -> None:
    # deepspeed-distributed: OpenMPI with the launcher as a node, so numNodes 3 is a launcher PodSet of 1 and a
    # node PodSet of 2, each with its own topology request (the launcher a required rack, the nodes a preferred
    # one) and its own ranks.
    kube.apply(
        trainjob(
            "tas-mpi",
            "deepspeed-distributed",
            labels={QUEUE_LABEL: tas_queue},
            trainer={"numNodes": 3, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}},
            runtimePatches=[topology_patch({"launcher": (REQUIRED, RACK), "node": (PREFERRED, RACK)}, "60s")],
        ),
        namespace=namespace,
    )
    assert_placed_as_kueue_decided(kube, namespace, "tas-mpi", {"launcher": 1, "node": 2})


def test_a_cut_torch_trainer_is_admitted_for_every_pod_and_placed_in_kueues_domains(
    kube: Kube, namespace: str, tas_queue: str
) -> None:
    """numNodes 4 at most 2 per Job (issue 37): Kueue computes the TrainJob's JobSet from upstream's code (one Job
    of 4), so it admits one PodSet of 4 pods and assigns 4 hosts; the JobSet runs 2 Jobs of 2, and every pod lands on
    a host of that assignment, each host as many times as Kueue counted it (Kueue's ungater cannot read ranks of 2
    Jobs it took for one, so which rank lands where is its greedy choice: docs/usage.md)."""
    cut = trainjob(
        "tas-cut",
        "torch-distributed",
        labels={QUEUE_LABEL: tas_queue},
        trainer={
            "numNodes": 4,
            "command": ["python", "train.py"],
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}},
        },
        runtimePatches=[topology_patch({"node": (REQUIRED, BLOCK)}, "60s")],
    )
    cut["metadata"]["annotations"] = {"trainer.kubeflow.org/max-nodes-per-job": "2"}
    kube.apply(cut, namespace=namespace)
    running = eventually(
        lambda: (
            ps
            if len(ps := [p for p in pods(kube, namespace, "tas-cut") if p["status"].get("phase") == "Running"]) == 4
            else None
        ),
        "all 4 pods of tas-cut running",
        timeout=120,
    )
    job = get(kube, "trainjob", "tas-cut", namespace)
    workload = next(
        w
        for w in kube.items("workloads", namespace)
        if w["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    )
    (pod_set,) = [p for p in workload["spec"]["podSets"] if p["name"] == "node"]
    assert pod_set["count"] == 4, pod_set
    # What Kueue took the trainer for: one Job, so the pods of Job 1 carry a job index it cannot rank.
    assert pod_set["topologyRequest"]["subGroupCount"] == 1, pod_set["topologyRequest"]
    (assignment,) = [a for a in workload["status"]["admission"]["podSetAssignments"] if a["name"] == "node"]
    assert assignment["count"] == 4
    jobset = get(kube, "jobset", "tas-cut", namespace)
    node = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "node")
    assert (node["replicas"], node["template"]["spec"]["parallelism"]) == (2, 2)
    assert sorted((p["metadata"]["labels"][JOB_INDEX], p["metadata"]["labels"][COMPLETION_INDEX]) for p in running) == [
        ("0", "0"),
        ("0", "1"),
        ("1", "0"),
        ("1", "1"),
    ]
    assert sorted(p["spec"]["nodeName"] for p in running) == sorted(hosts_by_rank(assignment["topologyAssignment"]))
    for pod in running:
        assert not pod["spec"].get("schedulingGates"), f"{pod['metadata']['name']} still gated"
        assert pod["spec"]["nodeSelector"][HOST] == pod["spec"]["nodeName"]
