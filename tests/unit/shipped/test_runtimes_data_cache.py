"""The opt-in data-cache runtime (KEP-2655, `torch-distributed-with-cache`) and the kubeflow SDK's
DataCacheInitializer: what the SDK POSTs is admitted and rendered with the env the cache initializer reads.

The cache initializer (upstream's dataset-initializer image, `cache://` URIs) reads its configuration from env:
STORAGE_URI, TRAIN_JOB_NAME, CACHE_IMAGE, IAM_ROLE, METADATA_LOC (required) and CLUSTER_SIZE, HEAD_CPU, HEAD_MEM,
WORKER_CPU, WORKER_MEM (optional), and runs as the ServiceAccount `kubeflow-trainer-cache-initializer`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import FIXED_KEYS, by_kind, jobset_of
from trainjob_operator.cli import main
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.validation import check_runtime, check_trainjob

REPO = Path(__file__).resolve().parents[3]
RUNTIME_FILE = REPO / "runtimes" / "data-cache" / "torch-distributed-with-cache.yaml"
RUNTIME = yaml.safe_load(RUNTIME_FILE.read_text())
FRAMEWORK = Framework.from_registry()
JOBSET_NAME_FIELD = {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}}
HARDENED_POD = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
HARDENED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_the_runtime_is_upstreams_with_restricted_pods_and_the_initializer_mount() -> None:
    """upstream v2.3.0 manifests/base/runtimes/data-cache, plus Pod Security and the `initializer` emptyDir."""
    jobs = RUNTIME["spec"]["template"]["spec"]["replicatedJobs"]
    assert (RUNTIME["kind"], RUNTIME["metadata"]) == (
        "ClusterTrainingRuntime",
        {"name": "torch-distributed-with-cache", "labels": {"trainer.kubeflow.org/framework": "torch"}},
    )
    assert RUNTIME["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}
    assert jobs == [
        {
            "name": "dataset-initializer",
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
                "spec": {
                    "template": {
                        "spec": {
                            "serviceAccountName": "kubeflow-trainer-cache-initializer",
                            "securityContext": HARDENED_POD,
                            "containers": [
                                {
                                    "name": "dataset-initializer",
                                    "image": "ghcr.io/kubeflow/trainer/dataset-initializer:v2.3.0",
                                    "env": [
                                        {"name": "CACHE_IMAGE", "value": "ghcr.io/kubeflow/trainer/data-cache:v2.3.0"},
                                        {"name": "TRAIN_JOB_NAME", "valueFrom": JOBSET_NAME_FIELD},
                                        {"name": "HOME", "value": "/tmp"},
                                    ],
                                    "securityContext": HARDENED_CONTAINER,
                                    "volumeMounts": [{"name": "initializer", "mountPath": "/workspace/dataset"}],
                                }
                            ],
                            "volumes": [{"name": "initializer", "emptyDir": {}}],
                        }
                    }
                },
            },
        },
        {
            "name": "node",
            "dependsOn": [{"name": "dataset-initializer", "status": "Complete"}],
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {
                    "template": {
                        "spec": {
                            "securityContext": HARDENED_POD,
                            "containers": [
                                {
                                    "name": "node",
                                    "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
                                    "workingDir": "/workspace",
                                    "env": [
                                        {"name": "TRAIN_JOB_NAME", "valueFrom": JOBSET_NAME_FIELD},
                                        {"name": "HOME", "value": "/workspace"},
                                    ],
                                    "securityContext": HARDENED_CONTAINER,
                                    "volumeMounts": [{"name": "workspace", "mountPath": "/workspace"}],
                                }
                            ],
                            "volumes": [{"name": "workspace", "emptyDir": {}}],
                        }
                    }
                },
            },
        },
    ]


# --- what the kubeflow SDK 0.5.0 POSTs for a DataCacheInitializer ---------------------------------------


class _Call:
    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value

    def get(self, timeout: float | None = None) -> dict[str, Any]:
        return self.value


class _CustomObjects:
    """The API calls train() makes, answered like the API server; the created TrainJob is kept."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, async_req: bool = False
    ) -> _Call:
        from kubernetes.client import ApiException

        raise ApiException(status=404, reason="Not Found")

    def get_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str, async_req: bool = False
    ) -> _Call:
        assert (plural, name) == ("clustertrainingruntimes", RUNTIME["metadata"]["name"])
        return _Call(copy.deepcopy(RUNTIME))

    def create_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, body: dict[str, Any], **_: Any
    ) -> dict[str, Any]:
        self.created.append(body)
        return body


def sdk_trainjob(**cache: Any) -> dict[str, Any]:
    """The TrainJob `TrainerClient.train()` creates for CustomTrainer + DataCacheInitializer (no cluster)."""
    trainer = pytest.importorskip("kubeflow.trainer")
    backend_module = pytest.importorskip("kubeflow.trainer.backends.kubernetes.backend")
    backend = object.__new__(backend_module.KubernetesBackend)
    backend.namespace = "default"
    backend.custom_api = _CustomObjects()

    def train_fn() -> None:  # pragma: no cover - runs in the pod
        print("reading the cache")

    name = backend.train(
        runtime="torch-distributed-with-cache",
        initializer=trainer.Initializer(dataset=trainer.DataCacheInitializer(**cache)),
        trainer=trainer.CustomTrainer(func=train_fn, num_nodes=2),
    )
    created: list[dict[str, Any]] = backend.custom_api.created
    (body,) = created
    assert body["metadata"]["name"] == name
    body["metadata"].update(namespace="default", uid="uid-1")
    return body


def render(body: dict[str, Any]) -> list[dict[str, Any]]:
    runtime, checked = check_runtime(copy.deepcopy(RUNTIME))
    assert runtime is not None and checked.ok, checked.errors
    job, validation = check_trainjob(body)
    assert job is not None and validation.ok, validation.errors
    admitted = FRAMEWORK.validate(None, job, RuntimeSource.of(runtime))
    assert admitted.ok, admitted.errors
    return FRAMEWORK.desired_objects(job, RuntimeSource.of(runtime), Observed(keys=FIXED_KEYS))


def initializer_env(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    jobset = jobset_of(objects)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kubeflow-trainer-cache-initializer"
    (ctr,) = pod["containers"]
    env: list[dict[str, Any]] = ctr["env"]
    return env


def test_the_sdks_data_cache_trainjob_renders_with_the_cache_initializers_env() -> None:
    body = sdk_trainjob(
        storage_uri="cache://sales/orders",
        metadata_loc="s3://bucket/orders/metadata.json",
        num_data_nodes=3,
        head_cpu="2",
        head_mem="4Gi",
        worker_cpu="4",
        worker_mem="8Gi",
        iam_role="arn:aws:iam::123456789012:role/cache",
    )
    assert body["spec"]["initializer"] == {
        "dataset": {
            "storageUri": "cache://sales/orders",
            "env": [
                {"name": "CLUSTER_SIZE", "value": "4"},
                {"name": "METADATA_LOC", "value": "s3://bucket/orders/metadata.json"},
                {"name": "HEAD_CPU", "value": "2"},
                {"name": "HEAD_MEM", "value": "4Gi"},
                {"name": "WORKER_CPU", "value": "4"},
                {"name": "WORKER_MEM", "value": "8Gi"},
                {"name": "IAM_ROLE", "value": "arn:aws:iam::123456789012:role/cache"},
            ],
        }
    }
    objects = render(body)
    assert [o["kind"] for o in objects] == ["JobSet"]
    assert initializer_env(objects) == [
        {"name": "CACHE_IMAGE", "value": "ghcr.io/kubeflow/trainer/data-cache:v2.3.0"},
        {"name": "TRAIN_JOB_NAME", "valueFrom": JOBSET_NAME_FIELD},
        {"name": "HOME", "value": "/tmp"},
        {"name": "STORAGE_URI", "value": "cache://sales/orders"},
        {"name": "CLUSTER_SIZE", "value": "4"},
        {"name": "METADATA_LOC", "value": "s3://bucket/orders/metadata.json"},
        {"name": "HEAD_CPU", "value": "2"},
        {"name": "HEAD_MEM", "value": "4Gi"},
        {"name": "WORKER_CPU", "value": "4"},
        {"name": "WORKER_MEM", "value": "8Gi"},
        {"name": "IAM_ROLE", "value": "arn:aws:iam::123456789012:role/cache"},
    ]
    jobset = jobset_of(objects)
    node = jobset["spec"]["replicatedJobs"][1]
    assert node["dependsOn"] == [{"name": "dataset-initializer", "status": "Complete"}]
    assert node["template"]["spec"]["parallelism"] == 2
    assert {"name": "TRAIN_JOB_NAME", "valueFrom": JOBSET_NAME_FIELD} in node["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["env"]


def test_the_required_settings_of_the_cache_initializer_are_all_set() -> None:
    """Every field the cache initializer's config requires (no default) arrives as env."""
    body = sdk_trainjob(
        storage_uri="cache://s/t", metadata_loc="s3://b/m.json", num_data_nodes=2, iam_role="arn:aws:iam::1:role/r"
    )
    names = {e["name"] for e in initializer_env(render(body))}
    assert {"STORAGE_URI", "TRAIN_JOB_NAME", "CACHE_IMAGE", "IAM_ROLE", "METADATA_LOC", "CLUSTER_SIZE"} <= names


def test_cli_render_of_the_sdk_trainjob(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = sdk_trainjob(
        storage_uri="cache://s/t", metadata_loc="s3://b/m.json", num_data_nodes=2, iam_role="arn:aws:iam::1:role/r"
    )
    job_file = tmp_path / "trainjob.yaml"
    job_file.write_text(yaml.safe_dump(body))
    assert main(["validate", "-f", str(job_file), "-r", str(RUNTIME_FILE)]) == 0
    assert main(["render", "-f", str(job_file), "-r", str(RUNTIME_FILE)]) == 0
    out = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert [o["kind"] for o in out] == ["ConfigMap", "JobSet"]
    assert by_kind(out, "ConfigMap")[0]["metadata"]["name"] == f"{body['metadata']['name']}-runtime-snapshot"
    env = {e["name"]: e.get("value") for e in initializer_env(out)}
    assert (env["STORAGE_URI"], env["CLUSTER_SIZE"], env["METADATA_LOC"]) == ("cache://s/t", "3", "s3://b/m.json")
