"""TensorFlow multi-worker: the TF_CONFIG every trainer pod gets, read the way TensorFlow reads it, and (when a
TensorFlow build is at hand) MultiWorkerMirroredStrategy forming its cluster from the rendered env on loopback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from builders import RuntimeBuilder, TrainJobBuilder, container, container_of, jobset_of, replicated_job
from k8s_env import container_env
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plugins.tensorflow import tf_config

FRAMEWORK = Framework.from_registry()
INDEX_FIELD = c.JOB_COMPLETION_INDEX_FIELD
TASK_INDEX = {"name": "TF_TASK_INDEX", "valueFrom": {"fieldRef": {"fieldPath": INDEX_FIELD}}}
RUNTIMES_DIR = Path(__file__).resolve().parents[4] / "runtimes"

TF_RUNTIME = (
    RuntimeBuilder.make(name="tf")
    .set("metadata.labels", {c.FRAMEWORK_LABEL: "tensorflow"})
    .ml_policy(num_nodes=1)
    .jobs([replicated_job(c.NODE, c.ANCESTOR_TRAINER, [container(c.NODE, "tensorflow:test")])])
)


def tf_config_env(hosts: list[str]) -> dict[str, str]:
    workers = json.dumps([f"{h}:29500" for h in hosts], separators=(",", ":"))
    return {
        "name": "TF_CONFIG",
        "value": '{"cluster":{"worker":' + workers + '},"task":{"type":"worker","index":$(TF_TASK_INDEX)}}',
    }


def render(job: TrainJobBuilder, runtime: RuntimeBuilder) -> dict[str, Any]:
    return jobset_of(FRAMEWORK.desired_objects(job.obj(), runtime.source(), Observed()))


@dataclass
class Case:
    job: TrainJobBuilder
    runtime: RuntimeBuilder
    want: dict[str, Any]
    """The whole trainer `node` container."""
    trainer_job: str = c.NODE
    parallelism: int = 2
    extra: dict[str, Any] = field(default_factory=dict)


JOB = TrainJobBuilder.make(name="mnist", runtime="tf")
CASES = [
    pytest.param(
        Case(
            JOB.trainer(numNodes=2),
            TF_RUNTIME,
            {
                "name": "node",
                "image": "tensorflow:test",
                "env": [TASK_INDEX, tf_config_env(["mnist-node-0-0.mnist", "mnist-node-0-1.mnist"])],
                "ports": [{"containerPort": 29500}],
            },
        ),
        id="two workers named by JobSet's stable host names under its default subdomain",
    ),
    pytest.param(
        Case(
            JOB,
            TF_RUNTIME.ml_policy(num_nodes=3),
            {
                "name": "node",
                "image": "tensorflow:test",
                "env": [TASK_INDEX, tf_config_env([f"mnist-node-0-{i}.mnist" for i in range(3)])],
                "ports": [{"containerPort": 29500}],
            },
            parallelism=3,
        ),
        id="without spec.trainer the runtime's numNodes sets the worker count",
    ),
    pytest.param(
        Case(
            JOB.trainer(numNodes=2),
            TF_RUNTIME.set("spec.template.spec.network", {"subdomain": "tf-workers"}),
            {
                "name": "node",
                "image": "tensorflow:test",
                "env": [TASK_INDEX, tf_config_env(["mnist-node-0-0.tf-workers", "mnist-node-0-1.tf-workers"])],
                "ports": [{"containerPort": 29500}],
            },
        ),
        id="a runtime's own network.subdomain is the hosts' domain",
    ),
    pytest.param(
        Case(
            JOB.trainer(numNodes=2, env=[{"name": "EPOCHS", "value": "3"}]),
            TF_RUNTIME.node_container(
                env=[
                    {"name": "TF_CONFIG", "value": "stale"},
                    {"name": "HOME", "value": "/w"},
                    {"name": "TF_TASK_INDEX", "value": "9"},
                ]
            ),
            {
                "name": "node",
                "image": "tensorflow:test",
                "env": [
                    {"name": "HOME", "value": "/w"},
                    {"name": "EPOCHS", "value": "3"},
                    TASK_INDEX,
                    tf_config_env(["mnist-node-0-0.mnist", "mnist-node-0-1.mnist"]),
                ],
                "ports": [{"containerPort": 29500}],
            },
        ),
        id="the runtime's own TF vars are replaced and the index always precedes TF_CONFIG, which expands it",
    ),
    pytest.param(
        Case(
            JOB.trainer(numNodes=2),
            TF_RUNTIME.jobs([replicated_job("worker", c.ANCESTOR_TRAINER, [container(c.NODE, "tensorflow:test")])]),
            {
                "name": "node",
                "image": "tensorflow:test",
                "env": [TASK_INDEX, tf_config_env(["mnist-worker-0-0.mnist", "mnist-worker-0-1.mnist"])],
                "ports": [{"containerPort": 29500}],
            },
            trainer_job="worker",
        ),
        id="the trainer replicated job's own name is in the host names",
    ),
    pytest.param(
        Case(
            JOB.trainer(numNodes=2),
            TF_RUNTIME.set("metadata.labels", {c.FRAMEWORK_LABEL: "jax"}),
            {"name": "node", "image": "tensorflow:test"},
        ),
        id="a runtime without the tensorflow framework label gets nothing",
    ),
    pytest.param(
        Case(
            JOB.trainer(numNodes=2),
            TF_RUNTIME.ml_policy(num_nodes=1, jax={}),
            {
                "name": "node",
                "image": "tensorflow:test",
                "env": [
                    {"name": "JAX_NUM_PROCESSES", "value": "2"},
                    {"name": "JAX_PROCESS_ID", "valueFrom": {"fieldRef": {"fieldPath": INDEX_FIELD}}},
                    {"name": "JAX_COORDINATOR_ADDRESS", "value": "mnist-node-0-0.mnist:29500"},
                ],
                "ports": [{"containerPort": 29500}],
            },
        ),
        id="a framework policy wins over the tensorflow label: no TF_CONFIG beside JAX's env",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_trainer_container(case: Case) -> None:
    jobset = render(case.job, case.runtime)
    (rj,) = jobset["spec"]["replicatedJobs"]
    assert (rj["name"], rj["template"]["spec"]["parallelism"]) == (case.trainer_job, case.parallelism)
    assert container_of(jobset, case.trainer_job) == case.want


@pytest.mark.parametrize(
    ("env", "errors"),
    [
        pytest.param(
            [
                {"name": "TF_CONFIG", "value": "{}"},
                {"name": "OK", "value": "1"},
                {"name": "TF_TASK_INDEX", "value": "0"},
            ],
            [
                "spec.trainer.env[0]: Forbidden: TF_CONFIG is reserved for the TensorFlow runtime",
                "spec.trainer.env[2]: Forbidden: TF_TASK_INDEX is reserved for the TensorFlow runtime",
            ],
            id="TF_CONFIG and TF_TASK_INDEX are reserved, each named by its index",
        ),
        pytest.param([{"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"}], [], id="other TF_ variables are the user's"),
    ],
)
def test_reserved_env(env: list[dict[str, Any]], errors: list[str]) -> None:
    verdict = FRAMEWORK.validate(None, JOB.trainer(numNodes=2, env=env).obj(), TF_RUNTIME.source())
    assert [str(e) for e in verdict.errors] == errors


def test_reserved_env_is_free_on_other_runtimes() -> None:
    job = JOB.trainer(env=[{"name": "TF_CONFIG", "value": "{}"}]).obj()
    assert FRAMEWORK.validate(None, job, TF_RUNTIME.set("metadata.labels", {}).source()).errors == ()


def test_tf_config_writes_the_index_unquoted() -> None:
    assert tf_config(["a:1"], "$(I)") == '{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":$(I)}}'
    assert json.loads(tf_config(["a:1", "b:2"], "1")) == {
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1},
    }


# --- the default runtime, each pod's env as the kubelet builds it, read as TensorFlow reads it ----------------


def default_runtime() -> RuntimeBuilder:
    import yaml

    return RuntimeBuilder(yaml.safe_load((RUNTIMES_DIR / "tensorflow-distributed.yaml").read_text()))


def pod_envs(name: str, workers: int) -> list[dict[str, str]]:
    """Each pod's environment: the rendered node container with the pod's completion index filled in."""
    job = TrainJobBuilder.make(name=name, runtime="tensorflow-distributed", kind=c.CLUSTER_TRAINING_RUNTIME_KIND)
    node = container_of(render(job.trainer(numNodes=workers), default_runtime()), c.NODE)
    return [container_env(node["env"], {INDEX_FIELD: str(i)}) for i in range(workers)]


def resolve_like_tensorflow(environ: dict[str, str]) -> tuple[dict[str, list[str]], str, int, str]:
    """TFConfigClusterResolver: json-load TF_CONFIG, ClusterSpec from `cluster`, task type/index from `task`
    (index through int()), master() = the task's own address in the cluster spec (no rpc_layer: plain)."""
    tf_config_doc = json.loads(environ.get("TF_CONFIG", "{}"))
    cluster = {job: list(tasks) for job, tasks in tf_config_doc.get("cluster", {}).items()}
    task_type = tf_config_doc["task"]["type"]
    task_id = int(tf_config_doc["task"]["index"])
    return cluster, task_type, task_id, cluster[task_type][task_id]


def test_every_pod_resolves_its_own_address_in_one_shared_cluster() -> None:
    resolved = [resolve_like_tensorflow(env) for env in pod_envs("mnist", 3)]
    hosts = [f"mnist-node-0-{i}.mnist:29500" for i in range(3)]
    assert resolved == [({"worker": hosts}, "worker", i, hosts[i]) for i in range(3)]


def test_the_default_runtime_sets_home_before_the_tf_vars() -> None:
    assert list(pod_envs("mnist", 1)[0]) == ["HOME", "TF_TASK_INDEX", "TF_CONFIG"]


# --- MultiWorkerMirroredStrategy for real, on loopback ------------------------------------------------------

WORKER = textwrap.dedent("""
    import json
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    per_replica = strategy.run(lambda: tf.constant(float(resolver.task_id + 1)))
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)
    print("RESULT " + json.dumps({"task": [resolver.task_type, resolver.task_id],
                                  "cluster": resolver.cluster_spec().as_dict(),
                                  "replicas": strategy.num_replicas_in_sync, "sum": float(total)}))
""")


def tensorflow_python() -> str | None:
    """A Python with TensorFlow: $TRAINJOB_OPERATOR_TF_PYTHON, else this one if it imports tensorflow
    (`pip install -e .[tensorflow]`)."""
    candidate = os.environ.get("TRAINJOB_OPERATOR_TF_PYTHON") or sys.executable
    try:
        probe = subprocess.run(
            [candidate, "-c", "import tensorflow"],
            capture_output=True,
            timeout=120,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
    except OSError:
        return None
    return candidate if probe.returncode == 0 else None


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.mark.slow
def test_multi_worker_mirrored_strategy_forms_its_cluster_on_loopback(tmp_path: Path) -> None:
    python = tensorflow_python()
    if python is None:
        pytest.skip("TensorFlow is not installed (pip install -e .[tensorflow] or set TRAINJOB_OPERATOR_TF_PYTHON)")
    workers = 2
    envs = pod_envs("mnist", workers)
    ports = free_ports(workers)
    loopback = {f"mnist-node-0-{i}.mnist:29500": f"127.0.0.1:{ports[i]}" for i in range(workers)}
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs = []
    for env in envs:
        tf_config_value = env["TF_CONFIG"]
        for pod_host, local in loopback.items():
            tf_config_value = tf_config_value.replace(pod_host, local)
        child = {**os.environ, "TF_CONFIG": tf_config_value, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
        procs.append(
            subprocess.Popen(
                [python, str(script)], env=child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err[-3000:]
        line = next(line for line in out.splitlines() if line.startswith("RESULT "))
        results.append(json.loads(line.removeprefix("RESULT ")))
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    assert results == [
        {"task": ["worker", i], "cluster": cluster, "replicas": workers, "sum": 3.0} for i in range(workers)
    ]
