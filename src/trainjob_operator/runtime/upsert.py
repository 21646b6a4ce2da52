"""Keyed upserts onto typed containers and pod specs, with upstream's keys (docs/upstream-behaviour.md#upserts)."""

from collections.abc import Iterable

from ..api.core import Container, ContainerPort, EnvVar, PodSpec, Volume, VolumeMount


def upsert_env(container: Container, env: Iterable[EnvVar], fresh: bool = False) -> None:
    """Env by name: an existing entry is replaced in place, a new one appended. Each entry is copied (the container
    never shares an object with a TrainJob or another container) unless the caller says the entries are `fresh`:
    made for this container alone."""
    current = container.env if container.env is not None else []
    index = {e.name: i for i, e in enumerate(current)}
    for var in env:
        entry = var if fresh else var.model_copy()
        at = index.get(var.name)
        if at is None:
            index[var.name] = len(current)
            current.append(entry)
        else:
            current[at] = entry
    if container.env is None:  # a new list; the existing one was changed in place (a model's setattr costs)
        container.env = current


def upsert_port(container: Container, port: ContainerPort) -> None:
    """Ports match by containerPort or by name; two unnamed ports compare equal, as upstream
    (docs/upstream-behaviour.md#upserts)."""
    current = container.ports if container.ports is not None else []
    for i, existing in enumerate(current):
        if existing.container_port == port.container_port or existing.name == port.name:
            current[i] = port.model_copy()
            break
    else:
        current.append(port.model_copy())
    if container.ports is None:
        container.ports = current


def upsert_volume_mount(container: Container, mount: VolumeMount) -> None:
    """Volume mounts match by mountPath, not by name (docs/upstream-behaviour.md#upserts)."""
    current = container.volume_mounts if container.volume_mounts is not None else []
    for i, existing in enumerate(current):
        if existing.mount_path == mount.mount_path:
            current[i] = mount.model_copy()
            break
    else:
        current.append(mount.model_copy())
    container.volume_mounts = current


def upsert_volume(pod: PodSpec, volume: Volume) -> None:
    current = pod.volumes if pod.volumes is not None else []
    for i, existing in enumerate(current):
        if existing.name == volume.name:
            current[i] = volume.model_copy()
            break
    else:
        current.append(volume.model_copy())
    pod.volumes = current


def find_container(pod: PodSpec | None, name: str, include_init: bool = False) -> Container | None:
    """The container `name`, looked up among regular containers first, then (optionally) init containers."""
    if pod is None:
        return None
    for container in pod.containers:
        if container.name == name:
            return container
    if include_init:
        for container in pod.init_containers or []:
            if container.name == name:
                return container
    return None
