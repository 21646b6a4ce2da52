"""A trainer cut into bounded Jobs (issue 37, `trainer.kubeflow.org/max-nodes-per-job`) on a real kube-apiserver, JobSet
and Job controllers (kwok nodes): the JobSet's trainer is 2 Jobs of 4, the pods are the names JobSet gives them,
and each pod's own command, run by a real /bin/sh with the values its downward API gives it, hands the training
command the ranks 0..7, each once."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from k8s_env import container_env
from operator_fixtures import Kube, OperatorProcess, condition, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

RUNTIMES = Path(__file__).resolve().parents[2] / "runtimes"
NAME = "cut"
NODES, PER_JOB = 8, 4


def pods_of(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return [
        p for p in kube.items("pods", namespace) if p["metadata"].get("labels", {}).get(c.JOBSET_NAME_LABEL) == NAME
    ]


def pod_fields(pod: dict[str, Any]) -> dict[str, str]:
    """The downward API's values of a pod's labels and annotations, by fieldPath."""
    meta = pod["metadata"]
    return {
        **{f"metadata.labels['{k}']": v for k, v in (meta.get("labels") or {}).items()},
        **{f"metadata.annotations['{k}']": v for k, v in (meta.get("annotations") or {}).items()},
    }


def run_as_the_pod(pod: dict[str, Any], bin_dir: Path) -> list[str]:
    """The pod's `node` container's command with the environment the kubelet would give it; `python` is a stand-in
    that prints what the training code would read."""
    node = next(ctr for ctr in pod["spec"]["containers"] if ctr["name"] == c.NODE)
    env = container_env(node["env"], pod_fields(pod))
    out = subprocess.run(
        [*node["command"], *(node.get("args") or [])],
        env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    return out.stdout.splitlines()


def test_a_trainjob_of_8_nodes_at_most_4_per_job_runs_2_jobs_whose_pods_have_ranks_0_to_7(
    kube: Kube, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    kube.apply(yaml.safe_load((RUNTIMES / "torch-distributed.yaml").read_text()))
    kube.apply(
        {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": NAME, "annotations": {c.MAX_NODES_PER_JOB_ANNOTATION: str(PER_JOB)}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"numNodes": NODES, "command": ["python", "train.py"], "args": ["--lr", "0.1 0.2"]},
            },
        },
        namespace=namespace,
    )
    pods = eventually(
        lambda: (lambda found: found if len(found) == NODES else None)(pods_of(kube, namespace)),
        f"{NODES} trainer pods",
        timeout=90,
    )
    node_job = next(r for r in kube.get("jobset", NAME, namespace)["spec"]["replicatedJobs"] if r["name"] == c.NODE)
    assert (node_job["replicas"], node_job["template"]["spec"]["parallelism"]) == (2, PER_JOB)
    assert node_job["template"]["spec"]["completions"] == PER_JOB
    jobs = {p["metadata"]["labels"][c.JOB_NAME_LABEL] for p in pods}
    assert jobs == {f"{NAME}-node-0", f"{NAME}-node-1"}
    hosts = sorted(f"{p['spec']['hostname']}.{p['spec']['subdomain']}" for p in pods)
    assert hosts == sorted(f"{NAME}-node-{j}-{i}.{NAME}" for j in range(2) for i in range(PER_JOB))

    python = tmp_path / "python"
    python.write_text(
        '#!/bin/sh\nprintf \'%s\\n\' "$PET_NODE_RANK" "$JOB_COMPLETION_INDEX" "$PET_NNODES" "$PET_MASTER_ADDR" "$@"\n'
    )
    python.chmod(0o755)
    ranks = {}
    for pod in pods:
        rank, index, nnodes, master, *argv = run_as_the_pod(pod, tmp_path)
        assert (rank, index) == (rank, rank), "JOB_COMPLETION_INDEX is the rank for the training code"
        assert (nnodes, master) == (str(NODES), f"{NAME}-node-0-0.{NAME}")
        assert argv == ["train.py", "--lr", "0.1 0.2"], "the arguments word for word"
        labels = pod["metadata"]["labels"]
        assert int(rank) == int(labels[c.JOBSET_JOB_INDEX_KEY]) * PER_JOB + int(labels[c.JOB_COMPLETION_INDEX_LABEL])
        ranks[int(rank)] = pod["spec"]["hostname"]
    assert sorted(ranks) == list(range(NODES)), "every rank once"
    assert ranks[0] == f"{NAME}-node-0-0", "rank 0 where PET_MASTER_ADDR points"

    done = eventually(lambda: condition(kube.get("trainjob", NAME, namespace), "Complete"), "Complete", timeout=120)
    assert done["status"] == "True"
    status = kube.get("trainjob", NAME, namespace)["status"]
    assert status.get("state") != "Failed", status


def test_a_cut_trainer_resized_while_suspended_gets_more_jobs_of_the_same_size(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    """8 nodes at most 4 per Job are 2 Jobs of 4; resized to 12 while suspended they are 3 Jobs of 4: the Jobs'
    number changes, not their size, and JobSet keeps replicatedJobs immutable, so the JobSet is made anew."""
    kube.apply(yaml.safe_load((RUNTIMES / "torch-distributed.yaml").read_text()))
    kube.apply(
        {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": "grown", "annotations": {c.MAX_NODES_PER_JOB_ANNOTATION: str(PER_JOB)}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "suspend": True,
                "trainer": {"numNodes": NODES, "command": ["python", "train.py"]},
            },
        },
        namespace=namespace,
    )
    old = eventually(lambda: kube.get("jobset", "grown", namespace), "the suspended JobSet")
    kube.patch("trainjob", "grown", namespace, {"spec": {"trainer": {"numNodes": 12}}})
    jobset = eventually(
        lambda: (j := kube.get("jobset", "grown", namespace)) and j["metadata"]["uid"] != old["metadata"]["uid"] and j,
        "the JobSet made anew with 3 Jobs",
        timeout=60,
    )
    node = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == c.NODE)
    assert (node["replicas"], node["template"]["spec"]["parallelism"]) == (3, PER_JOB)
    env = {e["name"]: e.get("value") for e in node["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PET_NNODES"] == "12"
    kube.patch("trainjob", "grown", namespace, {"spec": {"suspend": False}})
    eventually(
        lambda: (
            len([p for p in kube.items("pods", namespace) if p["metadata"]["name"].startswith("grown-node-")]) == 12
        ),
        "12 trainer pods",
        timeout=90,
    )
    now = kube.get("jobset", "grown", namespace)
    assert now["metadata"]["uid"] == jobset["metadata"]["uid"], "rebuilt once: the resume updates it, never rebuilds it"


def test_the_webhook_refuses_a_bad_bound_and_a_change_naming_the_annotation(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(yaml.safe_load((RUNTIMES / "torch-distributed.yaml").read_text()))

    def trainjob(name: str, bound: str) -> dict[str, Any]:
        return {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": name, "annotations": {c.MAX_NODES_PER_JOB_ANNOTATION: bound}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "suspend": True,
                "trainer": {"numNodes": NODES, "command": ["python", "train.py"]},
            },
        }

    refused = kube.create(trainjob("bad", "4\x1b[2J"), namespace, check=False)
    assert refused.returncode != 0 and "\x1b" not in refused.stderr
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in refused.stderr
    assert f"metadata.annotations[{c.MAX_NODES_PER_JOB_ANNOTATION}]: Invalid value" in refused.stderr
    assert "must be a positive integer" in refused.stderr
    kube.create(trainjob("fixed", "4"), namespace)
    changed = kube.run(
        "annotate",
        "trainjob",
        "fixed",
        "-n",
        namespace,
        f"{c.MAX_NODES_PER_JOB_ANNOTATION}=2",
        "--overwrite",
        check=False,
    )
    assert "cannot be added, changed or removed after the TrainJob is created" in changed.stderr, changed.stderr
