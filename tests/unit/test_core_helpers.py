"""Strategic merge, keyed upserts, quantities and the runtime snapshot."""

from decimal import Decimal
from typing import Any

import pytest

from builders import RuntimeBuilder, TrainJobBuilder
from trainjob_operator.api.core import Container, ContainerPort, EnvVar, VolumeMount
from trainjob_operator.runtime import smp
from trainjob_operator.runtime.errors import BuildError
from trainjob_operator.runtime.quantity import QuantityError, format_quantity, parse_quantity
from trainjob_operator.runtime.snapshot import build_snapshot, runtime_from_snapshot
from trainjob_operator.runtime.upsert import upsert_env, upsert_port, upsert_volume_mount


@pytest.mark.parametrize(
    ("original", "patch", "want"),
    [
        pytest.param({"a": 1, "b": {"c": 1}}, {"b": {"d": 2}}, {"a": 1, "b": {"c": 1, "d": 2}}, id="maps merge"),
        pytest.param({"a": 1, "b": 2}, {"b": None}, {"a": 1}, id="null deletes"),
        pytest.param(
            {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
            {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
            id="env merges by name, in place then appended",
        ),
        pytest.param(
            {"volumeMounts": [{"name": "x", "mountPath": "/a"}]},
            {"volumeMounts": [{"name": "y", "mountPath": "/a"}]},
            {"volumeMounts": [{"name": "y", "mountPath": "/a"}]},
            id="volumeMounts merge by mountPath",
        ),
        pytest.param(
            {"tolerations": [{"key": "a"}]},
            {"tolerations": [{"key": "b"}]},
            {"tolerations": [{"key": "b"}]},
            id="tolerations are replaced",
        ),
        pytest.param({"args": ["a"]}, {"args": ["b"]}, {"args": ["b"]}, id="plain lists are replaced"),
    ],
)
def test_strategic_merge(original: dict[str, Any], patch: dict[str, Any], want: dict[str, Any]) -> None:
    before = repr(original)
    assert smp.merge(original, patch) == want
    assert repr(original) == before


def test_upserts_follow_upstream_keys() -> None:
    ctr = Container(
        name="node",
        env=[EnvVar(name="A", value="1")],
        ports=[ContainerPort(container_port=8080)],
        volume_mounts=[VolumeMount(name="a", mount_path="/x")],
    )
    upsert_env(ctr, [EnvVar(name="A", value="2"), EnvVar(name="B", value="3")])
    upsert_port(ctr, ContainerPort(container_port=29500))
    upsert_volume_mount(ctr, VolumeMount(name="b", mount_path="/x"))
    assert ctr.to_wire() == {
        "name": "node",
        "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}],
        "ports": [{"containerPort": 29500}],
        "volumeMounts": [{"name": "b", "mountPath": "/x"}],
    }


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("4Gi", Decimal(4 * 2**30)),
        ("1k", Decimal(1000)),
        (2.5, Decimal("2.5")),
        (3, Decimal(3)),
        ("1e3", Decimal(1000)),
    ],
)
def test_parse_quantity(text: str | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


def test_bad_quantity_names_the_text() -> None:
    with pytest.raises(QuantityError, match="'lots'"):
        parse_quantity("lots")


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [
        (Decimal(102), False, "102"),
        (Decimal("0.5"), False, "500m"),
        (Decimal(408 * 2**30), True, "408Gi"),
        (Decimal(1536 * 2**20), True, "1536Mi"),
    ],
)
def test_format_quantity(value: Decimal, binary: bool, text: str) -> None:
    assert format_quantity(value, binary) == text


def test_snapshot_round_trips_and_guards_ownership() -> None:
    job = TrainJobBuilder.make().obj()
    runtime = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}).template_labels(marker="v1").source()
    configmap = build_snapshot(job, runtime)
    assert configmap["metadata"]["name"] == "test-job-runtime-snapshot"
    assert "kind: TrainingRuntime" in configmap["data"]["runtime"]
    restored = runtime_from_snapshot(job, configmap)
    assert (restored.kind, restored.name, restored.spec) == (runtime.kind, runtime.name, runtime.spec)

    stolen = {
        **configmap,
        "metadata": {
            **configmap["metadata"],
            "ownerReferences": [{**configmap["metadata"]["ownerReferences"][0], "uid": "other"}],
        },
    }
    with pytest.raises(BuildError, match="owned by another object"):
        runtime_from_snapshot(job, stolen)
    with pytest.raises(BuildError, match='missing "runtime" data key'):
        runtime_from_snapshot(job, {**configmap, "data": {}})
    other = TrainJobBuilder.make(runtime="another").obj()
    with pytest.raises(BuildError, match="runtimeRef names"):
        runtime_from_snapshot(other, configmap)


UPSTREAM_LIKE_RUNTIME: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "deepspeed-distributed", "labels": {"trainer.kubeflow.org/framework": "deepspeed"}},
    "spec": {
        "mlPolicy": {
            "numNodes": 1,
            "mpi": {
                "numProcPerNode": 1,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": "/home/mpiuser/.ssh",
                "runLauncherAsNode": True,
            },
        },
        "template": {
            "spec": {
                "network": {"publishNotReadyAddresses": True, "enableDNSHostnames": True},
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                "failurePolicy": {
                    "maxRestarts": 3,
                    "restartStrategy": "Recreate",
                    "rules": [{"name": "r", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
                },
                "volumeClaimPolicies": [
                    {
                        "templates": [
                            {
                                "metadata": {"name": "initializer"},
                                "spec": {
                                    "accessModes": ["ReadWriteOnce"],
                                    "resources": {"requests": {"storage": "20Gi"}},
                                },
                            }
                        ]
                    }
                ],
                "replicatedJobs": [
                    {
                        "name": "node",
                        "groupName": "default",
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "backoffLimit": 0,
                                "podFailurePolicy": {
                                    "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}]
                                },
                                "template": {
                                    "spec": {
                                        "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
                                        "tolerations": [{"key": "gpu", "operator": "Exists"}],
                                        "containers": [
                                            {
                                                "name": "node",
                                                "image": "ghcr.io/kubeflow/trainer/deepspeed-runtime",
                                                "command": ["/usr/sbin/sshd", "-De"],
                                                "readinessProbe": {
                                                    "tcpSocket": {"port": 2222},
                                                    "initialDelaySeconds": 5,
                                                },
                                                "securityContext": {"allowPrivilegeEscalation": False},
                                                "imagePullPolicy": "IfNotPresent",
                                                "resources": {"limits": {"nvidia.com/gpu": 1}},
                                                "volumeMounts": [
                                                    {
                                                        "name": "initializer",
                                                        "mountPath": "/workspace",
                                                        "readOnly": True,
                                                        "subPath": "x",
                                                    }
                                                ],
                                            }
                                        ],
                                    }
                                },
                            }
                        },
                    },
                ],
            }
        },
    },
}


def test_embedded_kubernetes_types_round_trip_without_loss() -> None:
    from trainjob_operator.api.runtime import ClusterTrainingRuntime

    assert ClusterTrainingRuntime.model_validate(UPSTREAM_LIKE_RUNTIME).to_wire() == UPSTREAM_LIKE_RUNTIME
