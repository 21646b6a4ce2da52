"""Keyed upserts into containers (`runtime/upsert.py`), keyed as upstream keys them."""

from trainjob_operator.api.core import Container, ContainerPort, EnvVar, VolumeMount
from trainjob_operator.runtime.upsert import upsert_env, upsert_port, upsert_volume_mount


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
