"""The kubectl path: TrainJobs against our default runtimes on the full local control plane (kube-apiserver,
controller-manager, scheduler, kwok GPU nodes, the JobSet controller) with the operator as it runs in production.

Pods are faked by kwok: they run for 2 s and succeed unless a runtime patch gives them the annotations
`trainjob-operator.test/run-for` / `trainjob-operator.test/exit-code` (see hack/harness/tools/stages)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_support import (
    ANCESTOR,
    COMPLETE,
    EXIT_CODE,
    FAILED,
    RUN_FOR,
    container,
    get,
    kwok_patch,
    pods,
    trainjob,
    wait_condition,
)

from builders import env_of, rjob
from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.timeout(180)]


@pytest.fixture(autouse=True)
def _operator_with_runtimes(operator: OperatorProcess, default_runtimes: list[str]) -> None:
    """Every test here needs the operator and the default runtimes."""


def assert_complete(kube: Kube, namespace: str, name: str, timeout: float = 90) -> dict[str, Any]:
    cond = wait_condition(kube, namespace, name, "Complete", timeout)
    assert (cond["reason"], cond["message"]) == COMPLETE
    job = get(kube, "trainjob", name, namespace)
    assert condition(job, "Failed") is None
    return job


def test_torch_multi_node_env_and_master_address(kube: Kube, namespace: str) -> None:
    name = "torch-mn"
    kube.apply(
        trainjob(
            name,
            "torch-distributed",
            trainer={
                "numNodes": 3,
                "command": ["torchrun", "train.py"],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}},
            },
            runtimePatches=[kwok_patch({"node": {RUN_FOR: "6s"}})],
        ),
        namespace=namespace,
    )
    running = eventually(
        lambda: (
            (p := pods(kube, namespace, name, "node"))
            and len(p) == 3
            and all(x["status"].get("phase") == "Running" for x in p)
            and p
        ),
        "3 running node pods",
        timeout=60,
    )
    by_index = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p for p in running}
    assert sorted(by_index) == ["0", "1", "2"]
    for index, pod in by_index.items():
        env = env_of(container(pod["spec"]))
        assert env["PET_NNODES"] == "3"
        assert env["PET_NPROC_PER_NODE"] == "auto"  # GPUs requested: torchrun decides
        assert env["PET_MASTER_PORT"] == "29500"
        assert env["PET_NODE_RANK"] == {
            "fieldRef": {
                "apiVersion": "v1",
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
            }
        }
        assert pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == index
        assert env["PET_MASTER_ADDR"] == f"{name}-node-0-0.{name}"
        ctr = container(pod["spec"])
        assert {"containerPort": 29500, "protocol": "TCP"} in ctr["ports"]
        assert ctr["resources"]["limits"]["nvidia.com/gpu"] == "2"
    # The master address resolves to the JobSet's first pod: hostname.subdomain of completion index 0,
    # behind the JobSet's headless Service named after the TrainJob.
    first = by_index["0"]["spec"]
    assert (first["hostname"], first["subdomain"]) == (f"{name}-node-0-0", name)
    svc = get(kube, "service", name, namespace)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == {"jobset.sigs.k8s.io/jobset-name": name}
    job = assert_complete(kube, namespace, name)
    assert job["status"]["jobsStatus"] == [
        {"name": "node", "active": 0, "ready": 0, "succeeded": 1, "failed": 0, "suspended": 0}
    ]


def test_deepspeed_mpi_launcher_waits_for_nodes(kube: Kube, namespace: str) -> None:
    name = "ds"
    kube.apply(
        trainjob(
            name,
            "deepspeed-distributed",
            trainer={"numNodes": 3, "command": ["mpirun", "--hostfile", "/etc/mpi/hostfile", "python", "train.py"]},
            # sshd on the nodes runs until the JobSet finishes; the launcher runs 3 s once the nodes are Ready
            runtimePatches=[kwok_patch({"node": {RUN_FOR: "300s"}, "launcher": {RUN_FOR: "3s"}})],
        ),
        namespace=namespace,
    )
    jobset = eventually(lambda: kube.get("jobset", name, namespace), "the JobSet", timeout=30)
    hostfile = get(kube, "configmap", f"{name}-mpi-hostfile", namespace)["data"]["hostfile"]
    assert hostfile == (
        f"{name}-node-0-0.{name} slots=1\n{name}-node-0-1.{name} slots=1\n{name}-launcher-0-0.{name} slots=1\n"
    )
    secret = get(kube, "secret", f"{name}-mpi-ssh-auth", namespace)
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert sorted(secret["data"]) == ["ssh-privatekey", "ssh-publickey"]
    assert rjob(jobset, "launcher")["dependsOn"] == [{"name": "node", "status": "Ready"}]
    # The launcher Job is only created once every node pod is Ready.
    launcher = eventually(lambda: pods(kube, namespace, name, "launcher"), "the launcher pod", timeout=60)
    nodes = pods(kube, namespace, name, "node")
    assert len(nodes) == 2
    node_jobs = json.loads(
        kube.run(
            "get", "jobs", "-n", namespace, "-l", "jobset.sigs.k8s.io/replicatedjob-name=node", "-o", "json"
        ).stdout
    )["items"]
    launcher_job = get(kube, "job", f"{name}-launcher-0", namespace)
    assert node_jobs and launcher_job["metadata"]["creationTimestamp"] >= node_jobs[0]["metadata"]["creationTimestamp"]
    for pod in nodes:
        ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"
        assert ready["lastTransitionTime"] <= launcher[0]["metadata"]["creationTimestamp"]
    spec = launcher[0]["spec"]
    ctr = container(spec)
    mounts = {m["mountPath"]: m["name"] for m in ctr["volumeMounts"]}
    assert mounts["/home/mpiuser/.ssh"] == "mpi-ssh-auth" and mounts["/etc/mpi"] == "mpi-hostfile"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["mpi-hostfile"]["configMap"]["name"] == f"{name}-mpi-hostfile"
    assert volumes["mpi-ssh-auth"]["secret"]["secretName"] == f"{name}-mpi-ssh-auth"
    assert ctr["command"] == ["mpirun", "--hostfile", "/etc/mpi/hostfile", "python", "train.py"]
    env = env_of(ctr)
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_set_default_slots"] == "1"
    node_mounts = {m["mountPath"] for m in container(nodes[0]["spec"])["volumeMounts"]}
    assert "/home/mpiuser/.ssh" in node_mounts
    assert_complete(kube, namespace, name)


@pytest.mark.parametrize(
    ("runtime", "env_check"),
    [
        (
            "jax-distributed",
            lambda env, name: (
                env["JAX_NUM_PROCESSES"] == "2"
                and env["JAX_COORDINATOR_ADDRESS"] == f"{name}-node-0-0.{name}:29500"
                and "JAX_PROCESS_ID" in env
            ),
        ),
        (
            "xgboost-distributed",
            lambda env, name: (
                env["DMLC_NUM_WORKER"] == "2"
                and env["DMLC_TRACKER_URI"] == f"{name}-node-0-0.{name}"
                and env["DMLC_TRACKER_PORT"] == "29500"
            ),
        ),
    ],
    ids=["jax", "xgboost"],
)
def test_jax_and_xgboost_complete(kube: Kube, namespace: str, runtime: str, env_check: Any) -> None:
    name = runtime.split("-")[0]
    kube.apply(trainjob(name, runtime, trainer={"numNodes": 2, "command": ["python", "train.py"]}), namespace=namespace)
    jobset = eventually(lambda: kube.get("jobset", name, namespace), "the JobSet", timeout=30)
    node = rjob(jobset, "node")
    assert node["template"]["spec"]["parallelism"] == 2
    assert env_check(env_of(container(node["template"]["spec"]["template"]["spec"])), name)
    job = assert_complete(kube, namespace, name)
    assert job["status"]["jobsStatus"][0]["succeeded"] == 1


def test_initializers_run_before_the_trainer(kube: Kube, namespace: str) -> None:
    """torchtune-llama3.2-1b: dataset and model initializers, then `node` (dependsOn both Complete)."""
    name = "tune"
    # The runtime's volumeClaimPolicies create PVC `initializer-<jobset>`; kwok has no provisioner, so a
    # static PV of the requested size binds it.
    pv = f"{namespace}-initializer"
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv, "labels": {"trainjob-operator.test/owned": "true"}},
            "spec": {
                "capacity": {"storage": "20Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {"path": f"/tmp/{pv}"},
                "claimRef": {"namespace": namespace, "name": f"initializer-{name}"},
            },
        }
    )
    try:
        kube.apply(
            trainjob(
                name,
                "torchtune-llama3.2-1b",
                initializer={
                    "dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
                    "model": {
                        "storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct",
                        "env": [{"name": "ACCESS_TOKEN", "value": "hf_x"}],
                    },
                },
                trainer={"command": ["tune", "run"], "args": ["epochs=1"]},
            ),
            namespace=namespace,
        )
        job = assert_complete(kube, namespace, name, timeout=120)
        assert sorted(s["name"] for s in job["status"]["jobsStatus"]) == [
            "dataset-initializer",
            "model-initializer",
            "node",
        ]
        assert all(s["succeeded"] == 1 for s in job["status"]["jobsStatus"])
        jobs = {
            j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]: j
            for j in json.loads(kube.run("get", "jobs", "-n", namespace, "-o", "json").stdout)["items"]
        }
        assert sorted(jobs) == ["dataset-initializer", "model-initializer", "node"]
        node_created = jobs["node"]["metadata"]["creationTimestamp"]
        for init in ("dataset-initializer", "model-initializer"):
            assert jobs[init]["metadata"]["labels"][ANCESTOR] == init
            assert jobs[init]["status"]["completionTime"] <= node_created, "node started before its initializer"
        jobset = get(kube, "jobset", name, namespace)
        init_env = env_of(
            container(rjob(jobset, "model-initializer")["template"]["spec"]["template"]["spec"], "model-initializer")
        )
        assert init_env["STORAGE_URI"] == "hf://meta-llama/Llama-3.2-1B-Instruct" and init_env["ACCESS_TOKEN"] == "hf_x"
        cmd = container(rjob(jobset, "node")["template"]["spec"]["template"]["spec"])["command"]
        assert cmd[:5] == [
            "tune",
            "run",
            "--rdzv_endpoint=tune-node-0-0.tune:29500",
            "full_finetune_distributed",
            "--config",
        ]
    finally:
        kube.delete("persistentvolume", pv)


def assert_copied_from_jobset(
    kube: Kube, namespace: str, name: str, cond: dict[str, Any], reason: str, message: str
) -> None:
    """Upstream copies the JobSet's condition wholesale: JobSet v0.12 appends "(first failed job: <job>)"."""
    jobset_cond = condition(get(kube, "jobset", name, namespace), "Failed")
    assert jobset_cond is not None
    assert (cond["reason"], cond["message"]) == (jobset_cond["reason"], jobset_cond["message"])
    assert cond["reason"] == reason
    assert cond["message"] in (message, f"{message} (first failed job: {name}-node-0)")


def failing_runtime(
    name: str,
    *,
    backoff_limit: int = 0,
    failure_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A namespaced torch runtime whose pods fail (exit code 3) without Job retries."""
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "metadata": {"labels": {ANCESTOR: "trainer"}},
                    "spec": {
                        "backoffLimit": backoff_limit,
                        "template": {
                            "metadata": {"annotations": {EXIT_CODE: "3", RUN_FOR: "1s"}},
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "node", "image": "pytorch/pytorch:2.13.0"}],
                            },
                        },
                    },
                },
            }
        ]
    }
    if failure_policy:
        spec["failurePolicy"] = failure_policy
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": spec}},
    }


def test_failing_pod_fails_the_trainjob(kube: Kube, namespace: str) -> None:
    kube.apply(
        failing_runtime("fails"),
        trainjob("boom", "fails", kind="TrainingRuntime", trainer={"numNodes": 2}),
        namespace=namespace,
    )
    cond = wait_condition(kube, namespace, "boom", "Failed")
    assert_copied_from_jobset(kube, namespace, "boom", cond, *FAILED)
    job = get(kube, "trainjob", "boom", namespace)
    assert condition(job, "Complete") is None
    assert job["status"]["jobsStatus"][0]["failed"] == 1


def test_jobset_failure_policy_restarts_are_honoured(kube: Kube, namespace: str) -> None:
    kube.apply(
        failing_runtime("restarts", failure_policy={"maxRestarts": 2}),
        trainjob("retry", "restarts", kind="TrainingRuntime"),
        namespace=namespace,
    )
    cond = wait_condition(kube, namespace, "retry", "Failed", timeout=120)
    assert_copied_from_jobset(
        kube, namespace, "retry", cond, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"
    )
    assert get(kube, "jobset", "retry", namespace)["status"]["restarts"] == 2


def test_suspend_then_resume(kube: Kube, namespace: str) -> None:
    name = "paused"
    kube.apply(trainjob(name, "torch-distributed", suspend=True, trainer={"numNodes": 2}), namespace=namespace)
    cond = wait_condition(kube, namespace, name, "Suspended", timeout=30)
    assert (cond["reason"], cond["message"]) == ("Suspended", "TrainJob is suspended")
    jobset = get(kube, "jobset", name, namespace)
    assert jobset["spec"]["suspend"] is True
    assert pods(kube, namespace, name) == []
    kube.patch("trainjob", name, namespace, {"spec": {"suspend": False}})
    job = assert_complete(kube, namespace, name)
    # Resumed: the Suspended condition is removed, so the SDK sees Running (docs/compatibility.md D18).
    assert condition(job, "Suspended") is None
    assert get(kube, "jobset", name, namespace)["spec"]["suspend"] is False


def test_active_deadline_kills_a_running_job(kube: Kube, namespace: str) -> None:
    name = "late"
    kube.apply(
        trainjob(
            name,
            "torch-distributed",
            activeDeadlineSeconds=6,
            trainer={"numNodes": 1},
            runtimePatches=[kwok_patch({"node": {RUN_FOR: "600s"}})],
        ),
        namespace=namespace,
    )
    eventually(
        lambda: any(p["status"].get("phase") == "Running" for p in pods(kube, namespace, name)),
        "a running pod",
        timeout=30,
    )
    cond = wait_condition(kube, namespace, name, "Failed", timeout=60)
    assert (cond["reason"], cond["message"]) == ("DeadlineExceeded", "TrainJob exceeded its active deadline")
    eventually(lambda: kube.get("jobset", name, namespace) is None, "the JobSet deleted", timeout=30)
    eventually(lambda: not pods(kube, namespace, name), "the pods gone", timeout=60)


def test_delete_garbage_collects_everything_owned(kube: Kube, namespace: str) -> None:
    name = "gone"
    kube.apply(
        trainjob(
            name,
            "deepspeed-distributed",
            trainer={"numNodes": 2},
            runtimePatches=[kwok_patch({"node": {RUN_FOR: "600s"}, "launcher": {RUN_FOR: "600s"}})],
        ),
        namespace=namespace,
    )
    eventually(lambda: len(pods(kube, namespace, name)) == 2, "node and launcher pods", timeout=60)
    uid = get(kube, "trainjob", name, namespace)["metadata"]["uid"]
    owned = {
        (kind, n)
        for kind in ("jobset", "configmap", "secret")
        for n in [
            o["metadata"]["name"]
            for o in kube.items(kind, namespace)
            if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
        ]
    }
    # the status server's CA for the trainer pods (<tj>-tls-config, issue 15) is owned too, and collected with them
    assert owned == {
        ("jobset", name),
        ("configmap", f"{name}-mpi-hostfile"),
        ("configmap", f"{name}-runtime-snapshot"),
        ("configmap", f"{name}-tls-config"),
        ("secret", f"{name}-mpi-ssh-auth"),
    }
    kube.run("delete", "trainjob", name, "-n", namespace, "--wait=true", "--timeout=60s")

    def leftovers() -> list[str]:
        left = [f"{k}/{n}" for k, n in owned if kube.get(k, n, namespace) is not None]
        left += [f"job/{j['metadata']['name']}" for j in kube.items("jobs", namespace)]
        left += [f"pod/{p['metadata']['name']}" for p in kube.items("pods", namespace)]
        return left

    eventually(lambda: not leftovers() or None, "garbage collection of the TrainJob's objects", timeout=90)


def test_suspended_torchtune_job_resumes(kube: Kube, namespace: str) -> None:
    """A TrainJob created suspended (as Kueue creates them) against a runtime with volumeClaimPolicies resumes:
    upstream v2.3.0 cannot re-apply such a JobSet (docs/compatibility.md, D11); ours sends back what JobSet stored."""
    name = "tune-later"
    pv = f"{namespace}-initializer"
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "20Gi"},
                "accessModes": ["ReadWriteOnce"],
                "hostPath": {"path": f"/tmp/{pv}"},
                "claimRef": {"namespace": namespace, "name": f"initializer-{name}"},
            },
        }
    )
    try:
        kube.apply(
            trainjob(name, "torchtune-llama3.2-1b", suspend=True, trainer={"command": ["tune", "run"]}),
            namespace=namespace,
        )
        wait_condition(kube, namespace, name, "Suspended", timeout=30)
        kube.patch("trainjob", name, namespace, {"spec": {"suspend": False}})

        def outcome() -> dict[str, Any] | None:
            job = get(kube, "trainjob", name, namespace)
            error = condition(job, "ReconcileFailed")
            done = condition(job, "Complete")
            return job if (done and done["status"] == "True") or error else None

        job = eventually(outcome, "Complete, or the apply error", timeout=60)
        error = condition(job, "ReconcileFailed")
        assert error is None, error["message"]
        assert_complete(kube, namespace, name)
    finally:
        kube.delete("persistentvolume", pv)
