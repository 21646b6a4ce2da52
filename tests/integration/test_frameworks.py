"""Our framework runtimes on a real kube-apiserver, JobSet and Job controllers (kwok nodes): the pods the Job
controller creates carry a TF_CONFIG that, expanded the way the kubelet expands it, names the pod itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from k8s_env import container_env
from operator_fixtures import Kube, OperatorProcess, condition, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster

RUNTIMES = Path(__file__).resolve().parents[2] / "runtimes"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def default_runtime(name: str) -> dict[str, Any]:
    runtime: dict[str, Any] = yaml.safe_load((RUNTIMES / f"{name}.yaml").read_text())
    return runtime


def pods_of(kube: Kube, namespace: str, jobset: str) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.items("pods", namespace)
        if p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == jobset
    ]


def pod_fields(pod: dict[str, Any]) -> dict[str, str]:
    """The downward-API values of a pod's labels and annotations, by fieldPath (the Job controller adds its own
    JOB_COMPLETION_INDEX from the label)."""
    meta = pod["metadata"]
    return {
        **{f"metadata.labels['{k}']": v for k, v in (meta.get("labels") or {}).items()},
        **{f"metadata.annotations['{k}']": v for k, v in (meta.get("annotations") or {}).items()},
    }


def test_tensorflow_pods_each_get_the_whole_cluster_and_their_own_task(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(default_runtime("tensorflow-distributed"))
    kube.apply(
        {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": "mnist"},
            "spec": {
                "runtimeRef": {"name": "tensorflow-distributed"},
                "trainer": {"numNodes": 3, "command": ["python", "train.py"]},
            },
        },
        namespace=namespace,
    )
    pods = eventually(
        lambda: (lambda found: found if len(found) == 3 else None)(pods_of(kube, namespace, "mnist")),
        "three trainer pods",
        timeout=60,
    )
    by_index = {int(p["metadata"]["annotations"][COMPLETION_INDEX]): p for p in pods}
    assert sorted(by_index) == [0, 1, 2]
    # The names the pods really have: hostname and subdomain set by JobSet, resolvable through its headless Service.
    hosts = [f"{by_index[i]['spec']['hostname']}.{by_index[i]['spec']['subdomain']}:29500" for i in range(3)]
    assert hosts == [f"mnist-node-0-{i}.mnist:29500" for i in range(3)]
    for index, pod in by_index.items():
        node = next(ctr for ctr in pod["spec"]["containers"] if ctr["name"] == "node")
        env = container_env(node["env"], pod_fields(pod))
        assert json.loads(env["TF_CONFIG"]) == {
            "cluster": {"worker": hosts},
            "task": {"type": "worker", "index": index},
        }
        assert {"containerPort": 29500, "protocol": "TCP"} in node["ports"]
    done = eventually(lambda: condition(kube.get("trainjob", "mnist", namespace), "Complete"), "Complete", timeout=90)
    assert done["status"] == "True"


def test_horovod_launcher_runs_after_the_sshd_nodes_with_the_mpi_setup(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    kube.apply(default_runtime("horovod-distributed"))
    kube.apply(
        {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": "hvd"},
            "spec": {
                "runtimeRef": {"name": "horovod-distributed"},
                "trainer": {"numNodes": 3, "args": ["python", "train.py"]},
            },
        },
        namespace=namespace,
    )
    done = eventually(lambda: condition(kube.get("trainjob", "hvd", namespace), "Complete"), "Complete", timeout=120)
    assert done["status"] == "True"
    hostfile = kube.get("configmap", "hvd-mpi-hostfile", namespace)
    assert hostfile is not None
    # the runtime's template order: the two sshd nodes, then the launcher (which runs as the third node)
    assert hostfile["data"]["hostfile"] == "".join(
        f"hvd-{job}-0-{i}.hvd slots=1\n" for job, i in (("node", 0), ("node", 1), ("launcher", 0))
    )
    pods = pods_of(kube, namespace, "hvd")
    (launcher,) = [p for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "launcher"]
    node = next(ctr for ctr in launcher["spec"]["containers"] if ctr["name"] == "node")
    assert node["command"][0] == "mpirun" and node["args"] == ["python", "train.py"]
    mounts = {m["mountPath"]: (m["name"], m.get("subPath")) for m in node["volumeMounts"]}
    assert {
        path: mounts[path]
        for path in ("/etc/passwd", "/etc/group", "/etc/ssh/ssh_config", "/home/mpiuser/.ssh", "/etc/mpi")
    } == {
        "/etc/passwd": ("mpiuser-etc", "passwd"),
        "/etc/group": ("mpiuser-etc", "group"),
        "/etc/ssh/ssh_config": ("mpiuser-etc", "ssh_config"),
        "/home/mpiuser/.ssh": ("mpi-ssh-auth", None),
        "/etc/mpi": ("mpi-hostfile", None),
    }
    assert [ctr["name"] for ctr in launcher["spec"]["initContainers"]] == ["mpiuser-setup"]
