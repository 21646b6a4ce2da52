"""The kubeflow SDK path: `kubeflow` 0.5.0 from PyPI, unmodified, against our operator on the local control plane.

The SDK reads the kubeconfig of the session cluster; kwok serves the same fake container log for every pod
(the ClusterLogs entry of the harness), so `get_job_logs` has lines to return."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import COMPLETE, REPO, RUN_FOR, kwok_patch, pods, trainjob

from builders import env_of, rjob
from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytest.importorskip("kubeflow.trainer", reason="needs the kubeflow SDK: pip install kubeflow==0.5.0")
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import (
    BuiltinTrainer,
    CustomTrainer,
    DataCacheInitializer,
    HuggingFaceDatasetInitializer,
    HuggingFaceModelInitializer,
    Initializer,
    TorchTuneConfig,
    TrainerClient,
)
from kubeflow.trainer.options import Name
from kubeflow.trainer.options.kubernetes import (
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    TrainingRuntimeSpecPatch,
)

from harness.cluster import POD_LOG

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.timeout(240)]


@pytest.fixture
def client(kubeconfig: str, namespace: str, operator: OperatorProcess, default_runtimes: list[str]) -> TrainerClient:
    return TrainerClient(KubernetesBackendConfig(namespace=namespace, config_file=kubeconfig))


def train_fn(lr: float = 0.1, epochs: int = 1) -> None:  # pragma: no cover - runs in the (fake) pod
    import torch.distributed as dist

    dist.init_process_group(backend="gloo")
    print(f"rank {dist.get_rank()} lr={lr} epochs={epochs}")


def assert_deleted(client: TrainerClient, kube: Kube, namespace: str, name: str) -> None:
    client.delete_job(name)
    eventually(lambda: kube.get("trainjob", name, namespace) is None, f"TrainJob {name} deleted", timeout=60)
    eventually(
        lambda: kube.get("jobset", name, namespace) is None and not pods(kube, namespace, name),
        f"the JobSet and pods of {name} garbage-collected",
        timeout=90,
    )


def test_list_runtimes_lists_ours(client: TrainerClient, default_runtimes: list[str]) -> None:
    runtimes = {r.name: r for r in client.list_runtimes()}
    assert sorted(runtimes) == default_runtimes
    torch = runtimes["torch-distributed"]
    assert (torch.trainer.framework, torch.trainer.trainer_type.value) == ("torch", "CustomTrainer")
    assert runtimes["deepspeed-distributed"].trainer.framework == "deepspeed"
    tune = runtimes["torchtune-llama3.2-1b"]
    assert (tune.trainer.framework, tune.trainer.trainer_type.value) == ("torchtune", "BuiltinTrainer")
    assert (tune.trainer.device, tune.trainer.device_count) == ("gpu", "2")


def test_custom_trainer_function_end_to_end(client: TrainerClient, kube: Kube, namespace: str) -> None:
    name = client.train(
        runtime=client.get_runtime("torch-distributed"),
        trainer=CustomTrainer(
            func=train_fn,
            func_args={"lr": 0.01, "epochs": 2},
            num_nodes=2,
            resources_per_node={"cpu": 2, "memory": "4Gi", "gpu": 1},
            env={"FOO": "bar"},
        ),
    )
    job_cr = kube.get("trainjob", name, namespace)
    assert job_cr is not None  # accepted by our webhooks (and Kueue's)
    assert job_cr["spec"]["trainer"]["command"][:2] == ["bash", "-c"]
    job = client.wait_for_job_status(name, status={"Complete"}, timeout=120, polling_interval=1)
    assert job.status == "Complete" and job.num_nodes == 2 and job.runtime.name == "torch-distributed"
    cond = condition(kube.get("trainjob", name, namespace), "Complete")
    assert cond is not None and (cond["reason"], cond["message"]) == COMPLETE
    steps = {s.name: s for s in client.get_job(name).steps}
    assert sorted(steps) == ["node-0", "node-1"]
    assert all(s.status == "Succeeded" and s.pod_name for s in steps.values())
    assert (steps["node-0"].device, steps["node-0"].device_count) == ("gpu", "1")
    lines = [line.rstrip("\n") for line in client.get_job_logs(name)]
    assert lines == list(POD_LOG)
    assert_deleted(client, kube, namespace, name)


@pytest.fixture
def initializer_volume(kube: Kube, namespace: str) -> Iterator[str]:
    """A static PV for the torchtune runtime's `initializer` PVC (kwok has no provisioner)."""
    name, pv = "sdk-tune", f"{namespace}-initializer"
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
    yield name
    kube.delete("persistentvolume", pv)


def test_builtin_trainer_torchtune(client: TrainerClient, kube: Kube, namespace: str, initializer_volume: str) -> None:
    name = client.train(
        runtime=client.get_runtime("torchtune-llama3.2-1b"),
        initializer=Initializer(
            dataset=HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab/alpaca/data"),
            model=HuggingFaceModelInitializer(
                storage_uri="hf://meta-llama/Llama-3.2-1B-Instruct", access_token="hf_fake"
            ),
        ),
        trainer=BuiltinTrainer(
            config=TorchTuneConfig(epochs=1, batch_size=2, num_nodes=1, resources_per_node={"gpu": 1})
        ),
        options=[Name(initializer_volume)],
    )
    assert name == initializer_volume
    jobset: dict[str, Any] = eventually(lambda: kube.get("jobset", name, namespace), "the JobSet", timeout=30)
    node = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "node")
    command = node["template"]["spec"]["template"]["spec"]["containers"][0]["command"]
    # single GPU: upstream's torchtune plugin picks the single-device recipe
    assert command[:5] == ["tune", "run", "full_finetune_single_device", "--config", "llama3_2/1B_full_single_device"]
    job = client.wait_for_job_status(name, timeout=150, polling_interval=1)
    assert job.status == "Complete"
    steps = {s.name: s.status for s in job.steps}
    assert steps == {"dataset-initializer": "Succeeded", "model-initializer": "Succeeded", "node-0": "Succeeded"}
    assert [line.rstrip("\n") for line in client.get_job_logs(name, step="model-initializer")] == list(POD_LOG)
    assert_deleted(client, kube, namespace, name)


# --- the data cache (KEP-2655): the opt-in runtime, its RBAC, and the SDK's DataCacheInitializer --------------

CACHE_RUNTIME = REPO / "runtimes" / "data-cache" / "torch-distributed-with-cache.yaml"
CACHE_RBAC = REPO / "manifests" / "data-cache" / "rbac.yaml"
CACHE_SA = "kubeflow-trainer-cache-initializer"


@pytest.fixture
def data_cache(kube: Kube, namespace: str, operator: OperatorProcess) -> Iterator[str]:
    """What `manifests/overlays/data-cache` installs, with the ServiceAccount and RoleBinding in this namespace."""
    runtime = yaml.safe_load(CACHE_RUNTIME.read_text())
    kube.apply(runtime)  # through our runtime webhook
    for obj in (d for d in yaml.safe_load_all(CACHE_RBAC.read_text()) if d):
        if obj["kind"] != "ClusterRole":
            obj["metadata"]["namespace"] = namespace
            for subject in obj.get("subjects") or []:
                subject["namespace"] = namespace
        kube.apply(obj)
    yield runtime["metadata"]["name"]
    kube.delete("clustertrainingruntime", runtime["metadata"]["name"])


def jobs_of(kube: Kube, namespace: str, trainjob_name: str) -> dict[str, dict[str, Any]]:
    """The batch Jobs of a TrainJob's JobSet, by replicated job name."""
    return {
        j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]: j
        for j in kube.items("jobs", namespace)
        if j["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == trainjob_name
    }


def test_data_cache_initializer_end_to_end(client: TrainerClient, kube: Kube, namespace: str, data_cache: str) -> None:
    """The unmodified SDK's DataCacheInitializer against torch-distributed-with-cache: admitted, rendered with the
    cache initializer's env and identity, and the trainer starts only once the cache initializer completed."""
    slow_initializer = RuntimePatch(
        training_runtime_spec=TrainingRuntimeSpecPatch(
            template=JobSetTemplatePatch(
                spec=JobSetSpecPatch(
                    replicated_jobs=[
                        ReplicatedJobPatch(
                            name="dataset-initializer",
                            template=JobTemplatePatch(
                                spec=JobSpecPatch(template=PodTemplatePatch(metadata={"annotations": {RUN_FOR: "6s"}}))
                            ),
                        )
                    ]
                )
            )
        )
    )
    name = client.train(
        runtime=client.get_runtime(data_cache),
        initializer=Initializer(
            dataset=DataCacheInitializer(
                storage_uri="cache://sales/orders",
                metadata_loc="s3://bucket/orders/metadata.json",
                num_data_nodes=2,
                worker_mem="8Gi",
                iam_role="arn:aws:iam::123456789012:role/cache",
            )
        ),
        trainer=CustomTrainer(func=train_fn, num_nodes=2),
        options=[slow_initializer],
    )
    jobset: dict[str, Any] = eventually(lambda: kube.get("jobset", name, namespace), "the JobSet", timeout=30)
    init_pod = rjob(jobset, "dataset-initializer")["template"]["spec"]["template"]["spec"]
    assert init_pod["serviceAccountName"] == CACHE_SA
    env = env_of(init_pod["containers"][0])
    assert env == {
        "CACHE_IMAGE": "ghcr.io/kubeflow/trainer/data-cache:v2.3.0",
        "TRAIN_JOB_NAME": {
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}
        },
        "HOME": "/tmp",
        "STORAGE_URI": "cache://sales/orders",
        "CLUSTER_SIZE": "3",
        "METADATA_LOC": "s3://bucket/orders/metadata.json",
        "WORKER_MEM": "8Gi",
        "IAM_ROLE": "arn:aws:iam::123456789012:role/cache",
    }
    assert rjob(jobset, "node")["dependsOn"] == [{"name": "dataset-initializer", "status": "Complete"}]
    # the pods run as the cache initializer's ServiceAccount (it exists: the Job controller could create them)
    init_pods = eventually(lambda: pods(kube, namespace, name, "dataset-initializer"), "the initializer pod")
    assert [p["spec"]["serviceAccountName"] for p in init_pods] == [CACHE_SA]
    # order: the node Job is created only after the cache initializer's Job completed
    jobs: dict[str, dict[str, Any]] = eventually(
        lambda: (found := jobs_of(kube, namespace, name)) and "node" in found and found, "the node Job", timeout=60
    )
    initializer = jobs["dataset-initializer"]
    assert initializer["status"].get("succeeded") == 1 and initializer["status"].get("completionTime")
    assert initializer["status"]["completionTime"] <= jobs["node"]["metadata"]["creationTimestamp"]
    job = client.wait_for_job_status(name, status={"Complete"}, timeout=120, polling_interval=1)
    assert job.status == "Complete" and job.num_nodes == 2
    steps = {s.name: s.status for s in job.steps}
    assert steps == {"dataset-initializer": "Succeeded", "node-0": "Succeeded", "node-1": "Succeeded"}
    assert_deleted(client, kube, namespace, name)


# --- a Stalled TrainJob (issue 35) as the unmodified SDK sees it ---------------------------------------------------

UPSTREAM_CONDITION_TYPES = {"Suspended", "Complete", "Failed"}
"""The TrainJob condition types upstream v2.3 writes (its trainjob_types.go)."""
REPORT = """
import sys
from kubeflow.trainer import update_trainjob_status
sys.exit(0 if update_trainjob_status(progress_percent=37, metrics={"step": 12, "loss": 0.5}) else 1)
"""


def report_progress_as_the_pod(kube: Kube, namespace: str, name: str, tmp: Path) -> None:
    """The unmodified SDK's `update_trainjob_status`, run here with what the TrainJob's (kwok) trainer pod is given:
    the status server's URL, the CA of the TrainJob's ConfigMap and a token the API server issued bound to that pod
    with the projected volume's audience."""
    pod = eventually(
        lambda: next((p for p in pods(kube, namespace, name, "node") if p["status"].get("phase") == "Running"), None),
        f"a running trainer pod of {name}",
        timeout=90,
    )
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
    ca, token = tmp / "ca.crt", tmp / "token"
    ca.write_text(kube.existing("configmap", f"{name}-tls-config", namespace)["data"]["ca.crt"])
    audience = f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"
    bound = ["--bound-object-kind", "Pod", "--bound-object-name", pod["metadata"]["name"]]
    bound += ["--bound-object-uid", pod["metadata"]["uid"]]
    token.write_text(kube.run("create", "token", "default", "-n", namespace, "--audience", audience, *bound).stdout)
    pod_env = {
        **os.environ,
        "KUBEFLOW_TRAINER_SERVER_URL": str(env["KUBEFLOW_TRAINER_SERVER_URL"]),
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(ca),
        "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token),
    }
    result = subprocess.run([sys.executable, "-c", REPORT], env=pod_env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"update_trainjob_status returned False: {result.stderr}"


def test_a_stalled_trainjob_is_running_to_the_unmodified_sdk(
    client: TrainerClient, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """Our `status.state: Stalled` (reason ProgressStalled) after one progress report and 3 s of silence, while the
    conditions stay upstream's: SDK 0.5.0's get_job and list_jobs derive `Running` from them, as for any running
    TrainJob, and its API model reads the reported progress."""
    name = "sdk-stall"
    stall = {"progressTimeoutSeconds": 3, "action": "Report"}
    running = [kwok_patch({"node": {RUN_FOR: "600s"}})]
    kube.apply(trainjob(name, "torch-distributed", stallPolicy=stall, runtimePatches=running), namespace=namespace)
    report_progress_as_the_pod(kube, namespace, name, tmp_path)
    reported = time.monotonic()

    def stalled() -> dict[str, Any] | None:
        cr = kube.get("trainjob", name, namespace)
        return cr if cr and cr.get("status", {}).get("state") == "Stalled" else None

    cr: dict[str, Any] = eventually(stalled, f"TrainJob {name} Stalled", timeout=60)
    print(f"\nStalled {time.monotonic() - reported:.1f} s after the report (limit 3 s)")
    status = cr["status"]
    assert status["reason"] == "ProgressStalled" and status["trainerStatus"]["progressPercentage"] == 37
    assert {c["type"] for c in status.get("conditions") or []} <= UPSTREAM_CONDITION_TYPES
    assert not any(
        c["status"] == "True" and c["type"] in {"Complete", "Failed"} for c in status.get("conditions") or []
    )

    job = client.get_job(name)
    print(f"SDK get_job: status={job.status} steps={[(s.name, s.status) for s in job.steps]}")
    assert (job.status, job.num_nodes) == ("Running", 1)
    assert [(s.name, s.status) for s in job.steps] == [("node-0", "Running")]
    listed = {j.name: j.status for j in client.list_jobs()}
    assert listed[name] == "Running"
    # SDK 0.5.0's TrainJob type has no progress; the API model it parses the object with reads our trainerStatus.
    from kubeflow_trainer_api import models

    parsed = models.TrainerV1alpha1TrainJob.from_dict(kube.existing("trainjob", name, namespace))
    assert parsed is not None and parsed.status is not None and parsed.status.trainer_status is not None
    assert parsed.status.trainer_status.progress_percentage == 37
    assert {m.name: m.value for m in parsed.status.trainer_status.metrics or []} == {"step": "12", "loss": "0.5"}
    assert kube.existing("trainjob", name, namespace)["status"]["state"] == "Stalled", "still Stalled after the reads"
    assert_deleted(client, kube, namespace, name)
