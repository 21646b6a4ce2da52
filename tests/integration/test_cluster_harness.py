"""Self-test of the local control plane (hack/harness/tools, harness.cluster).

Everything here goes through the real kube-apiserver, kube-controller-manager
(job controller), kube-scheduler, kwok and the JobSet controller; nothing is
mocked. Waits poll with a deadline.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from cluster_fixtures import EXIT_CODE_ANNOTATION, RUN_FOR_ANNOTATION, wait_for

pytestmark = pytest.mark.cluster


def _apply(cluster: Any, obj: dict[str, Any]) -> None:
    cluster.kubectl("create", "-f", "-", input=json.dumps(obj))


def _get(cluster: Any, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    args = ["get", kind, name] + (["-n", namespace] if namespace else [])
    return cluster.kubectl_json(*args)


def _condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def _pod_template(annotations: dict[str, str] | None = None, gpus: int = 0) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "metadata": {"annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "resources": resources}],
        },
    }


def _job(
    name: str,
    namespace: str,
    *,
    completions: int = 1,
    annotations: dict[str, str] | None = None,
    gpus: int = 0,
    labels: dict[str, str] | None = None,
    suspend: bool = False,
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "completions": completions,
            "parallelism": completions,
            "backoffLimit": 0,
            "suspend": suspend,
            "template": _pod_template(annotations, gpus),
        },
    }


def test_api_server_answers(cluster: Any) -> None:
    assert cluster.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    version = json.loads(cluster.kubectl("get", "--raw", "/version").stdout)
    # Stamped at build time: components that parse the server version need it. The version asked for (`K8S_VERSION`:
    # `make test-e2e K8S_VERSION=1.34.4` runs this too), else the one hack/harness/tools/go.mod pins.
    wanted = cluster.k8s_version or "1.36."
    assert version["major"] == "1" and version["minor"] == wanted.split(".")[1]
    assert version["gitVersion"].startswith(f"v{wanted}")


def test_fake_gpu_nodes(cluster: Any) -> None:
    nodes = cluster.kubectl_json("get", "nodes")["items"]
    assert len(nodes) == cluster.nodes
    for node in nodes:
        alloc = node["status"]["allocatable"]
        assert alloc["nvidia.com/gpu"] == str(cluster.gpus_per_node)
        assert _condition(node, "Ready"), node["metadata"]["name"]


def test_crds_installed(cluster: Any) -> None:
    names = {c["metadata"]["name"] for c in cluster.kubectl_json("get", "crd")["items"]}
    assert {
        "jobsets.jobset.x-k8s.io",
        "podgroups.scheduling.x-k8s.io",
        "podgroups.scheduling.volcano.sh",
    } <= names


def test_batch_job_completes(cluster: Any, namespace: str) -> None:
    _apply(cluster, _job("ok", namespace, completions=2, gpus=8, annotations={RUN_FOR_ANNOTATION: "1s"}))
    job = wait_for(
        lambda: (lambda j: j if _condition(j, "Complete") else None)(_get(cluster, "job", "ok", namespace)),
        timeout=60,
        what="Job Complete",
    )
    assert job["status"]["succeeded"] == 2
    pods = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", "job-name=ok")["items"]
    # 8 GPUs each: the scheduler had to place them on two different fake nodes.
    assert len({p["spec"]["nodeName"] for p in pods}) == 2
    for p in pods:
        term = p["status"]["containerStatuses"][0]["state"]["terminated"]
        assert term["exitCode"] == 0


def test_pod_marked_to_fail_fails_its_job(cluster: Any, namespace: str) -> None:
    _apply(cluster, _job("bad", namespace, annotations={RUN_FOR_ANNOTATION: "500ms", EXIT_CODE_ANNOTATION: "3"}))
    job = wait_for(
        lambda: (lambda j: j if _condition(j, "Failed") else None)(_get(cluster, "job", "bad", namespace)),
        timeout=60,
        what="Job Failed",
    )
    assert _condition(job, "Failed")["reason"] == "BackoffLimitExceeded"
    pods = cluster.kubectl_json("get", "pods", "-n", namespace, "-l", "job-name=bad")["items"]
    assert pods and pods[0]["status"]["phase"] == "Failed"
    assert pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_jobset_completes(cluster: Any, namespace: str) -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "launcher",
                    "replicas": 1,
                    "template": {"spec": {"backoffLimit": 0, "template": _pod_template({RUN_FOR_ANNOTATION: "1s"})}},
                },
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "backoffLimit": 0,
                            "template": _pod_template({RUN_FOR_ANNOTATION: "1s"}, gpus=4),
                        }
                    },
                },
            ],
        },
    }
    _apply(cluster, jobset)
    js = wait_for(
        lambda: (lambda o: o if _condition(o, "Completed") else None)(_get(cluster, "jobset", "js", namespace)),
        timeout=90,
        what="JobSet Completed",
    )
    jobs = cluster.kubectl_json("get", "jobs", "-n", namespace)["items"]
    assert len(jobs) == 3 and all(_condition(j, "Complete") for j in jobs)
    # The JobSet pod webhook ran: pods carry the JobSet labels it manages.
    pods = cluster.kubectl_json("get", "pods", "-n", namespace)["items"]
    assert all(p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == "js" for p in pods)
    assert js["status"]["replicatedJobsStatus"]


def test_jobset_failure_propagates(cluster: Any, namespace: str) -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js-bad", "namespace": namespace},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "backoffLimit": 0,
                            "template": _pod_template({RUN_FOR_ANNOTATION: "500ms", EXIT_CODE_ANNOTATION: "1"}),
                        }
                    },
                }
            ]
        },
    }
    _apply(cluster, jobset)
    wait_for(
        lambda: _condition(_get(cluster, "jobset", "js-bad", namespace), "Failed"),
        timeout=90,
        what="JobSet Failed",
    )


@pytest.mark.kueue
def test_kueue_admits_workload(cluster: Any, namespace: str) -> None:
    suffix = uuid.uuid4().hex[:6]
    flavor, cq = f"flavor-{suffix}", f"cq-{suffix}"
    objs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "64"},
                                    {"name": "memory", "nominalQuota": "512Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": "16"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    ]
    try:
        for o in objs:
            _apply(cluster, o)
        _apply(
            cluster,
            _job(
                "queued",
                namespace,
                gpus=4,
                suspend=True,
                labels={"kueue.x-k8s.io/queue-name": "lq"},
                annotations={RUN_FOR_ANNOTATION: "1s"},
            ),
        )

        def admitted() -> Any:
            wls = cluster.kubectl_json("get", "workloads.kueue.x-k8s.io", "-n", namespace)["items"]
            return [w for w in wls if _condition(w, "Admitted")]

        wl = wait_for(admitted, timeout=60, what="Workload Admitted")[0]
        assert wl["status"]["admission"]["clusterQueue"] == cq
        wait_for(
            lambda: _condition(_get(cluster, "job", "queued", namespace), "Complete"),
            timeout=60,
            what="admitted Job Complete",
        )
    finally:
        cluster.kubectl("delete", "clusterqueue", cq, "--ignore-not-found", "--wait=false", check=False)
        cluster.kubectl("delete", "resourceflavor", flavor, "--ignore-not-found", "--wait=false", check=False)
