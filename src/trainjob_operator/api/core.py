"""The Kubernetes core types the pipeline touches. Fields not named here are kept as they came."""

from typing import Any, ClassVar

from pydantic import Field

from .base import K8sModel

Quantity = str | int | float


class ObjectMeta(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creation_timestamp: str | None = None


class LocalObjectReference(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.LocalObjectReference"

    name: str = ""


class EnvVar(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.EnvVar"

    name: str
    value: str | None = None
    value_from: dict[str, Any] | None = None


class ContainerPort(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.ContainerPort"

    container_port: int
    name: str | None = None
    protocol: str | None = None


class VolumeMount(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.VolumeMount"

    name: str
    mount_path: str
    read_only: bool | None = None


class ResourceRequirements(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.ResourceRequirements"

    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None
    claims: list[dict[str, Any]] | None = None


class Container(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.Container"

    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None
    env_from: list[dict[str, Any]] | None = None
    ports: list[ContainerPort] | None = None
    volume_mounts: list[VolumeMount] | None = None
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None


class Volume(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.Volume"

    name: str


class PodSpec(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.PodSpec"

    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] | None = None
    volumes: list[Volume] | None = None
    node_selector: dict[str, str] | None = None
    priority_class_name: str | None = None
    overhead: dict[str, Quantity] | None = None


class PodTemplateSpec(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.core.v1.PodTemplateSpec"

    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class JobSpec(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.batch.v1.JobSpec"

    parallelism: int | None = None
    completions: int | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


class JobTemplateSpec(K8sModel):
    k8s_definition: ClassVar[str] = "io.k8s.api.batch.v1.JobTemplateSpec"

    metadata: ObjectMeta | None = None
    spec: JobSpec = Field(default_factory=JobSpec)
