"""The default ClusterTrainingRuntimes in runtimes/: valid for us, renderable, parsable by the kubeflow SDK,
equivalent to upstream v2.3's shipped set (compatibility spec §9.1) plus our TensorFlow and Horovod runtimes, and
restricted-Pod-Security clean."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import FixedKeys, by_kind, jobset_of
from pss import restricted_violations
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.info import RuntimeSource
from trainjob_operator.runtime.observed import Observed, SSHKeyPair
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.validation import admit_runtime, check_runtime, check_trainjob

RUNTIMES_DIR = Path(__file__).resolve().parents[3] / "runtimes"
FRAMEWORK = Framework.from_registry()
FIXED_KEY = SSHKeyPair(private_pem=b"PRIVATE", public_openssh=b"ecdsa-sha2-nistp521 AAAA\n")
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"

# name -> (framework label, ML policy source ("" = numNodes only), replicated jobs in order, trainer image,
# SDK command head)
EXPECTED: dict[str, tuple[str, str, list[str], str, str]] = {
    "torch-distributed": ("torch", "torch", ["node"], "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime", "torchrun"),
    "torch-distributed-with-cache": (
        "torch",
        "torch",
        ["dataset-initializer", "node"],
        "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
        "torchrun",
    ),
    "deepspeed-distributed": (
        "deepspeed",
        "mpi",
        ["node", "launcher"],
        "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0",
        "mpirun",
    ),
    "mlx-distributed": ("mlx", "mpi", ["node", "launcher"], "ghcr.io/kubeflow/trainer/mlx-runtime:v2.3.0", "mpirun"),
    "jax-distributed": ("jax", "jax", ["node"], "nvcr.io/nvidia/jax:25.10-py3", "python"),
    "xgboost-distributed": (
        "xgboost",
        "xgboost",
        ["node"],
        "ghcr.io/kubeflow/trainer/xgboost-runtime:v2.3.0",
        "python",
    ),
    "torchtune-llama3.2-1b": (
        "torchtune",
        "torch",
        ["dataset-initializer", "model-initializer", "node"],
        "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.3.0",
        "tune",
    ),
    "torchtune-llama3.2-3b": (
        "torchtune",
        "torch",
        ["dataset-initializer", "model-initializer", "node"],
        "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.3.0",
        "tune",
    ),
    "torchtune-qwen2.5-1.5b": (
        "torchtune",
        "torch",
        ["dataset-initializer", "model-initializer", "node"],
        "ghcr.io/kubeflow/trainer/torchtune-trainer:v2.3.0",
        "tune",
    ),
}
# Ours, beyond upstream's set (v2.3 has no mlPolicy.tensorflow: the framework label opts in).
OURS: dict[str, tuple[str, str, list[str], str, str]] = {
    "tensorflow-distributed": ("tensorflow", "", ["node"], "tensorflow/tensorflow:2.21.0", "python"),
    "horovod-distributed": ("horovod", "mpi", ["node", "launcher"], "horovod/horovod:0.28.1", "mpirun"),
}
EXPECTED.update(OURS)
MODEL_URIS = {
    "torchtune-llama3.2-1b": "hf://meta-llama/Llama-3.2-1B-Instruct",
    "torchtune-llama3.2-3b": "hf://meta-llama/Llama-3.2-3B-Instruct",
    "torchtune-qwen2.5-1.5b": "hf://Qwen/Qwen2.5-1.5B-Instruct",
}
# Every runtime passes the restricted profile; a runtime that cannot must be listed here with its reason.
RESTRICTED_EXCEPTIONS: dict[str, str] = {}


def load_all() -> dict[str, dict[str, Any]]:
    objects: dict[str, dict[str, Any]] = {}
    for path in sorted(RUNTIMES_DIR.rglob("*.yaml")):  # runtimes/data-cache/: the opt-in data-cache runtime
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert len(docs) == 1, f"{path.name}: one runtime per file"
        obj = docs[0]
        assert path.name == f"{obj['metadata']['name']}.yaml", "file named after the runtime"
        objects[obj["metadata"]["name"]] = obj
    return objects


RUNTIMES = load_all()
NAMES = sorted(RUNTIMES)


def runtime(name: str) -> dict[str, Any]:
    return copy.deepcopy(RUNTIMES[name])


def source(name: str) -> RuntimeSource:
    parsed, validation = check_runtime(runtime(name))
    assert parsed is not None and validation.ok, validation.errors
    return RuntimeSource.of(parsed)


def sample_trainjob(name: str) -> dict[str, Any]:
    """What the SDK's train() would POST for this runtime (sdk-contract §3), two nodes where allowed."""
    framework = RUNTIMES[name]["metadata"]["labels"][FRAMEWORK_LABEL]
    spec: dict[str, Any] = {
        "runtimeRef": {"name": name, "apiGroup": c.GROUP, "kind": "ClusterTrainingRuntime"},
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }
    if framework == "torchtune":
        spec["trainer"] = {
            "numNodes": 1,
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}},
            "command": ["tune", "run"],
            "args": ["batch_size=2", "epochs=1"],
        }
        spec["initializer"] = {
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca/data"},
            "model": {"storageUri": MODEL_URIS[name]},
        }
    else:
        spec["trainer"] = {
            "numNodes": 2,
            "resourcesPerNode": {"requests": {"cpu": "2"}},
            "command": ["bash", "-c", "python train.py"],
        }
    return {
        "apiVersion": c.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "sample", "namespace": "default", "uid": "uid-1"},
        "spec": spec,
    }


def render(name: str) -> list[dict[str, Any]]:
    job, validation = check_trainjob(sample_trainjob(name))
    assert job is not None and validation.ok, validation.errors
    verdict = FRAMEWORK.validate(None, job, source(name))
    assert verdict.ok, verdict.errors
    return FRAMEWORK.desired_objects(job, source(name), Observed(keys=FixedKeys(FIXED_KEY)))


def pod_specs(jobset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {rj["name"]: rj["template"]["spec"]["template"]["spec"] for rj in jobset["spec"]["replicatedJobs"]}


# --- the set ---------------------------------------------------------------------------------------------


def test_the_upstream_set_and_ours_are_complete() -> None:
    assert set(RUNTIMES) == set(EXPECTED)


@pytest.mark.parametrize("name", NAMES)
def test_shape_matches_upstream(name: str) -> None:
    framework, policy, jobs, image, _ = EXPECTED[name]
    obj = RUNTIMES[name]
    assert obj["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert obj["kind"] == "ClusterTrainingRuntime"
    assert obj["metadata"]["labels"] == {FRAMEWORK_LABEL: framework}
    ml = obj["spec"]["mlPolicy"]
    assert ml == {"numNodes": 1} if not policy else (ml["numNodes"] == 1 and policy in ml)
    rjobs = obj["spec"]["template"]["spec"]["replicatedJobs"]
    assert [rj["name"] for rj in rjobs] == jobs
    trainer = [
        rj
        for rj in rjobs
        if (rj["template"].get("metadata") or {}).get("labels", {}).get(c.ANCESTOR_LABEL) == "trainer"
    ]
    assert len(trainer) == 1
    node = next(ct for ct in trainer[0]["template"]["spec"]["template"]["spec"]["containers"] if ct["name"] == "node")
    assert node["image"] == image
    if policy == "mpi":
        assert ml["mpi"] == {
            "numProcPerNode": 1,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": "/home/mpiuser/.ssh",
            "runLauncherAsNode": True,
        }
        spec = obj["spec"]["template"]["spec"]
        assert spec["network"] == {"publishNotReadyAddresses": True}
        assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
        assert rjobs[1]["dependsOn"] == [{"name": "node", "status": "Ready"}]
        sshd = rjobs[0]["template"]["spec"]["template"]["spec"]["containers"][0]
        assert sshd["command"] == ["/usr/sbin/sshd"] and sshd["args"] == ["-De", "-f", "/home/mpiuser/.sshd_config"]
        assert sshd["readinessProbe"]["tcpSocket"] == {"port": 2222}
    if framework == "torchtune":
        assert rjobs[2]["dependsOn"] == [
            {"name": "dataset-initializer", "status": "Complete"},
            {"name": "model-initializer", "status": "Complete"},
        ]
        assert node["command"][:6] == [
            "tune",
            "run",
            "--rdzv_endpoint=localhost:29500",
            "full_finetune_distributed",
            "--config",
            node["command"][5],
        ]
        assert node["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
        envs = {
            rj["name"]: {
                e["name"]: e.get("value")
                for e in rj["template"]["spec"]["template"]["spec"]["containers"][0].get("env", [])
            }
            for rj in rjobs
        }
        assert envs["dataset-initializer"]["STORAGE_URI"] == "hf://tatsu-lab/alpaca"
        assert envs["model-initializer"]["STORAGE_URI"] == MODEL_URIS[name]
        claims = obj["spec"]["template"]["spec"]["volumeClaimPolicies"][0]["templates"]
        assert claims[0]["metadata"]["name"] == "initializer"
        assert claims[0]["spec"]["resources"]["requests"]["storage"] == "20Gi"


# --- our validation and our pipeline ----------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_passes_schema_cel_and_the_runtime_webhook(name: str) -> None:
    parsed, validation = check_runtime(runtime(name))
    assert parsed is not None, validation.errors
    assert validation.ok, validation.errors
    admitted = admit_runtime(parsed)
    assert admitted.ok, admitted.errors
    assert admitted.warnings == ()


@pytest.mark.parametrize("name", NAMES)
def test_a_sample_trainjob_renders(name: str) -> None:
    objects = render(name)
    jobset = jobset_of(objects)
    assert jobset["metadata"]["name"] == "sample"
    specs = pod_specs(jobset)
    assert list(specs) == EXPECTED[name][2]
    node = next(ct for ct in specs["launcher" if "launcher" in specs else "node"]["containers"] if ct["name"] == "node")
    env = {e["name"] for e in node.get("env", [])}
    policy = EXPECTED[name][1]
    if EXPECTED[name][0] == "torchtune":
        assert {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK"} <= env
    elif policy == "torch":
        assert {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"} <= env
    elif policy == "jax":
        assert {"JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS"} <= env
    elif policy == "xgboost":
        assert {"DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"} <= env
    elif EXPECTED[name][0] == "tensorflow":
        assert {"TF_TASK_INDEX", "TF_CONFIG"} <= env
    else:
        assert "OMPI_MCA_orte_default_hostfile" in env
        assert len(by_kind(objects, "Secret")) == 1 and len(by_kind(objects, "ConfigMap")) >= 1
    if EXPECTED[name][0] != "torchtune":
        # the trainer's numNodes reaches the node job (MPI: the launcher is one of the nodes)
        rj = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "node")
        assert rj["template"]["spec"]["parallelism"] == (1 if policy == "mpi" else 2)


# --- restricted Pod Security ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_runtime_pod_templates_are_restricted(name: str) -> None:
    rjobs = RUNTIMES[name]["spec"]["template"]["spec"]["replicatedJobs"]
    problems = {rj["name"]: restricted_violations(rj["template"]["spec"]["template"]["spec"]) for rj in rjobs}
    if name in RESTRICTED_EXCEPTIONS:
        assert any(problems.values()), f"{name} is listed as an exception but passes"
    else:
        assert problems == {rj["name"]: [] for rj in rjobs}


@pytest.mark.parametrize("name", NAMES)
def test_rendered_pods_stay_restricted(name: str) -> None:
    """What the operator adds (MPI key Secret and hostfile volumes, env, ports) keeps the pods restricted."""
    specs = pod_specs(jobset_of(render(name)))
    expected: dict[str, list[str]] = {job: [] for job in specs}
    if name not in RESTRICTED_EXCEPTIONS:
        assert {job: restricted_violations(spec) for job, spec in specs.items()} == expected


def test_every_runtime_passes_restricted() -> None:
    passing = sorted(
        n
        for n in NAMES
        if all(
            not restricted_violations(rj["template"]["spec"]["template"]["spec"])
            for rj in RUNTIMES[n]["spec"]["template"]["spec"]["replicatedJobs"]
        )
    )
    assert passing == NAMES


# --- the kubeflow SDK ------------------------------------------------------------------------------------


class _Call:
    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value

    def get(self, timeout: float | None = None) -> dict[str, Any]:
        return self.value


class _CustomObjects:
    """The two calls list_runtimes makes, answered like the API server (camelCase dicts)."""

    def __init__(self, cluster: list[dict[str, Any]]) -> None:
        self.cluster = cluster

    def list_cluster_custom_object(self, group: str, version: str, plural: str, async_req: bool = False) -> _Call:
        assert (group, version, plural) == ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")
        return _Call(
            {
                "apiVersion": f"{group}/{version}",
                "kind": "ClusterTrainingRuntimeList",
                "metadata": {},
                "items": copy.deepcopy(self.cluster),
            }
        )

    def list_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, async_req: bool = False
    ) -> _Call:
        assert plural == "trainingruntimes"
        return _Call({"apiVersion": f"{group}/{version}", "kind": "TrainingRuntimeList", "metadata": {}, "items": []})


@pytest.fixture(scope="module")
def sdk_runtimes() -> dict[str, Any]:
    backend_module = pytest.importorskip("kubeflow.trainer.backends.kubernetes.backend")
    backend = object.__new__(backend_module.KubernetesBackend)  # no cluster: only the parsing is under test
    backend.namespace = "default"
    backend.custom_api = _CustomObjects(list(RUNTIMES.values()))
    return {rt.name: rt for rt in backend.list_runtimes()}


def test_the_sdk_lists_every_runtime(sdk_runtimes: dict[str, Any]) -> None:
    assert sorted(sdk_runtimes) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_the_sdk_reads_the_runtime_like_upstreams(name: str, sdk_runtimes: dict[str, Any]) -> None:
    framework, _, _, image, command = EXPECTED[name]
    rt = sdk_runtimes[name]
    assert rt.kind.value == "ClusterTrainingRuntime"
    assert rt.trainer.framework == framework
    assert rt.trainer.trainer_type.value == ("BuiltinTrainer" if framework == "torchtune" else "CustomTrainer")
    assert rt.trainer.image == image
    assert rt.trainer.num_nodes == 1
    constants = pytest.importorskip("kubeflow.trainer.constants.constants")
    assert (
        rt.trainer.command
        == {
            "torchrun": constants.TORCH_COMMAND,
            "mpirun": constants.MPI_COMMAND,
            "python": constants.DEFAULT_COMMAND,
            "tune": constants.TORCH_TUNE_COMMAND,
        }[command]
    )
    if framework == "torchtune":
        assert (rt.trainer.device, rt.trainer.device_count) == ("gpu", "2")  # "2" (string) x numNodes 1
    elif framework in ("deepspeed", "mlx", "horovod"):
        assert rt.trainer.device_count == "1"  # mpi.numProcPerNode x numNodes
    else:
        assert (rt.trainer.device, rt.trainer.device_count) == ("Unknown", "Unknown")  # no limits, as upstream


def test_the_sdk_accepts_upstreams_own_torch_runtime_shape(sdk_runtimes: dict[str, Any]) -> None:
    """sdk-contract §6.1: train() with no runtime uses `torch-distributed`."""
    assert "torch-distributed" in sdk_runtimes


def test_the_checker_flags_upstreams_unhardened_pods() -> None:
    """Upstream's v2.3 torch pod (no security context) and an sshd pod as root fail; ours pass."""
    assert restricted_violations({"containers": [{"name": "node", "image": "x"}]}) == [
        "containers[node] allowPrivilegeEscalation != false",
        "containers[node] runAsNonRoot != true",
        "containers[node] seccompProfile not RuntimeDefault/Localhost",
        "containers[node] does not drop ALL capabilities",
    ]
    hardened = RUNTIMES["deepspeed-distributed"]["spec"]["template"]["spec"]["replicatedJobs"][0]
    pod = copy.deepcopy(hardened["template"]["spec"]["template"]["spec"])
    pod["securityContext"]["runAsUser"] = 0
    pod["containers"][0]["securityContext"]["capabilities"]["add"] = ["SYS_CHROOT"]
    pod["volumes"] = [{"name": "keys", "hostPath": {"path": "/etc/ssh"}}]
    assert restricted_violations(pod) == [
        "volume keys is hostPath",
        "volume keys of type ['hostPath']",
        "pod runAsUser=0",
        "containers[node] adds capabilities ['SYS_CHROOT']",
    ]
