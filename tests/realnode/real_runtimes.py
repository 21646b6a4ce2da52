"""Runtimes of the shipped shapes (torch-distributed, deepspeed-distributed) for the real nodes (tests/realnode)."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import cluster as cluster_lib
from harness import plumbing, realnodes
from operator_fixtures import Kube, condition, eventually

REPO = Path(__file__).resolve().parents[2]


def _shipped(file: str, name: str) -> dict[str, Any]:
    """A shipped ClusterTrainingRuntime as a TrainingRuntime named `name` (namespaced: each test has its own)."""
    shipped = yaml.safe_load((REPO / "runtimes" / file).read_text())
    runtime = copy.deepcopy(shipped)
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"] = {"name": name, "labels": shipped["metadata"]["labels"]}
    return runtime


def _on_real_nodes(pod: dict[str, Any], spread_job: str | None) -> None:
    pod["nodeSelector"] = realnodes.REAL_NODE_SELECTOR
    pod["tolerations"] = [realnodes.REAL_NODE_TOLERATION]
    if spread_job is None:
        return
    # One pod of `spread_job` per node, so the ranks really talk across the pod network.
    pod["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/replicatedjob-name": spread_job}},
            "nodeAffinityPolicy": "Honor",
            "nodeTaintsPolicy": "Honor",
        }
    ]


def real_node_mpi_runtime(image: str, name: str) -> dict[str, Any]:
    """The shipped deepspeed-distributed runtime (launcher runs as a node, non-root sshd on 2222, the operator's key
    at /home/mpiuser/.ssh) as `name`, with the MPI image built here, pinned to the real nodes, the `node` pods one
    per node. Nothing else of the shape changes: commands, probes, security contexts and mlPolicy are the shipped
    ones."""
    runtime = _shipped("deepspeed-distributed.yaml", name)
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]["spec"]
        _on_real_nodes(pod, "node" if job["name"] == "node" else None)
        for container in pod["containers"]:
            container["image"] = image
            container["imagePullPolicy"] = "Never"
    return runtime


def real_node_runtime(
    image: str, name: str, *, torch_env: bool = False, backoff_limit: int | None = None
) -> dict[str, Any]:
    """The shipped torch-distributed runtime, namespaced as `name`, with an image built here and pinned to the real
    nodes, one pod per node; `torch_env` adds what torchrun and gloo need here, `backoff_limit` sets the Job's."""
    runtime = _shipped("torch-distributed.yaml", name)
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    if backoff_limit is not None:
        job["backoffLimit"] = backoff_limit
    pod = job["template"]["spec"]
    _on_real_nodes(pod, "node")
    container = pod["containers"][0]
    container["image"] = image
    container["imagePullPolicy"] = "Never"
    container["env"] = [
        *container.get("env", []),
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    if not torch_env:
        return runtime
    container["env"] += [
        {"name": "GLOO_SOCKET_IFNAME", "value": "eth0"},
        # Debian's torch 1.13 on Python 3.11: torchrun's default `--redirects 0`/`--tee 0` fail to parse
        # (Std.from_str iterates an IntFlag, which on 3.11 yields only its single-bit members, not 0 or 3) and
        # torchrun exits with "'NoneType' object has no attribute 'get'". stdout teed (1) parses and still reaches
        # the pod's log; stderr is not redirected. Output only: the topology comes from the operator's PET_* alone.
        {"name": "PET_REDIRECTS", "value": "1"},
        {"name": "PET_TEE", "value": "1"},
    ]
    return runtime


def real_trainjob(name: str, runtime: str, **trainer: Any) -> dict[str, Any]:
    """A TrainJob of the namespaced runtime `runtime` with `trainer` as its spec.trainer."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"}, "trainer": trainer},
    }


def finished(kube: Kube, name: str, namespace: str, timeout: float) -> dict[str, Any]:
    """The TrainJob once it is Complete or Failed."""
    job: dict[str, Any] = eventually(
        lambda: (
            (j := kube.get("trainjob", name, namespace)) and (condition(j, "Complete") or condition(j, "Failed")) and j
        ),
        f"TrainJob {name} to finish",
        timeout=timeout,
    )
    return job


@dataclass
class OnePodRun:
    """What `run_one_pod` saw: the finished TrainJob, its trainer pod, that pod's log, seconds from create to end."""

    job: dict[str, Any]
    pod: dict[str, Any]
    log: str
    seconds: float


def run_one_pod(kube: Kube, namespace: str, name: str, image: str, runtime: str, script: str) -> OnePodRun:
    """A one-node TrainJob of a runtime `runtime` on `image` whose trainer runs `python3 -c script`, until it ends
    (3 minutes at most); the progress tests' shape (the SDK called from a real pod)."""
    kube.create(real_node_runtime(image, runtime), namespace)
    created = time.monotonic()
    kube.create(real_trainjob(name, runtime, numNodes=1, command=["python3", "-c", script]), namespace)
    job = finished(kube, name, namespace, timeout=180)
    seconds = time.monotonic() - created
    [pod] = [p for p in kube.items("pods", namespace) if p["metadata"]["name"].startswith(f"{name}-node-")]
    return OnePodRun(job, pod, kube.run("logs", "-n", namespace, pod["metadata"]["name"]).stdout, seconds)


def _ctr(cluster: cluster_lib.ClusterInfo, socket: str, *args: str) -> str:
    ctr = [str(Path(cluster.real["bins"]) / "ctr"), "--address", socket, "--namespace", "k8s.io"]
    return plumbing.run([*ctr, *args]).stdout


def _containers_on(cluster: cluster_lib.ClusterInfo, socket: str, namespace: str) -> list[str]:
    return _ctr(cluster, socket, "containers", "ls", "-q", f'labels."io.kubernetes.pod.namespace"=={namespace}').split()


def containers(cluster: cluster_lib.ClusterInfo, namespace: str) -> list[str]:
    """Every container (sandboxes included, running or not) that either real node's containerd holds for pods of
    `namespace`: what is left once the kubelets have cleaned up."""
    return [c for socket in cluster.real["sockets"] for c in _containers_on(cluster, socket, namespace)]


def running_containers(cluster: cluster_lib.ClusterInfo, namespace: str) -> list[str]:
    """Containers (sandboxes included) of pods in `namespace` whose task containerd reports RUNNING, on every real
    node."""
    running = []
    for socket in cluster.real["sockets"]:
        ours = set(_containers_on(cluster, socket, namespace))
        for line in _ctr(cluster, socket, "tasks", "ls").splitlines()[1:]:
            task, _pid, status = line.split()[:3]
            if task in ours and status == "RUNNING":
                running.append(task)
    return running


def shell_trainjob(name: str, runtime: str, command: str, **spec: Any) -> dict[str, Any]:
    """A 2-node TrainJob of the namespaced runtime `runtime` running `command` in `sh -c`; `spec` adds to its spec."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 2, "command": ["sh", "-c", command]},
            **spec,
        },
    }


def pods_of(kube: Kube, namespace: str, trainjob: str) -> list[dict[str, Any]]:
    """The pods of TrainJob `trainjob` (its JobSet's, by the JobSet name label)."""
    return [
        p
        for p in kube.items("pods", namespace)
        if p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == trainjob
    ]


def pods_running(kube: Kube, namespace: str, trainjob: str, count: int = 2) -> bool:
    pods = pods_of(kube, namespace, trainjob)
    return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)


def busybox_runtime(name: str, *, backoff_limit: int | None = 0, grace: int = 3, **jobset: Any) -> dict[str, Any]:
    """The torch-shaped runtime with the busybox image, one pod per real node; the pods' termination grace is
    `grace` seconds (a `sleep` as PID 1 ignores SIGTERM, so the kubelet's SIGKILL ends it), `jobset` adds to the
    JobSet spec (failurePolicy, ttlSecondsAfterFinished)."""
    from harness import images

    runtime = real_node_runtime(images.ref("busybox"), name, backoff_limit=backoff_limit)
    template = runtime["spec"]["template"]["spec"]
    template.update(jobset)
    template["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    return runtime
