"""The kubeflow SDK path: `kubeflow` 0.5.0 from PyPI, unmodified, against our operator on the local control plane.

The SDK reads the kubeconfig of the session cluster; kwok serves the same fake container log for every pod
(the ClusterLogs entry of the harness), so `get_job_logs` has lines to return."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import COMPLETE, pods

from operator_fixtures import Kube, OperatorProcess, condition, eventually

pytest.importorskip("kubeflow.trainer", reason="needs the kubeflow SDK: pip install kubeflow==0.5.0")
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import (
    BuiltinTrainer,
    CustomTrainer,
    HuggingFaceDatasetInitializer,
    HuggingFaceModelInitializer,
    Initializer,
    TorchTuneConfig,
    TrainerClient,
)
from kubeflow.trainer.options import Name

from trainjob_operator.testing.cluster import POD_LOG

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
    eventually(lambda: kube.get("jobset", name, namespace) is None and not pods(kube, namespace, name),
               f"the JobSet and pods of {name} garbage-collected", timeout=90)


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
        trainer=CustomTrainer(func=train_fn, func_args={"lr": 0.01, "epochs": 2}, num_nodes=2,
                              resources_per_node={"cpu": 2, "memory": "4Gi", "gpu": 1}, env={"FOO": "bar"}))
    job_cr = kube.get("trainjob", name, namespace)
    assert job_cr is not None   # accepted by our webhooks (and Kueue's)
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
    kube.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv}, "spec": {
        "capacity": {"storage": "20Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": f"/tmp/{pv}"},
        "claimRef": {"namespace": namespace, "name": f"initializer-{name}"}}})
    yield name
    kube.delete("persistentvolume", pv)


def test_builtin_trainer_torchtune(client: TrainerClient, kube: Kube, namespace: str, initializer_volume: str) -> None:
    name = client.train(
        runtime=client.get_runtime("torchtune-llama3.2-1b"),
        initializer=Initializer(
            dataset=HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab/alpaca/data"),
            model=HuggingFaceModelInitializer(storage_uri="hf://meta-llama/Llama-3.2-1B-Instruct",
                                              access_token="hf_fake")),
        trainer=BuiltinTrainer(config=TorchTuneConfig(epochs=1, batch_size=2, num_nodes=1,
                                                      resources_per_node={"gpu": 1})),
        options=[Name(initializer_volume)])
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

