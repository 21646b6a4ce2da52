"""The runtime snapshot ConfigMap of v2.3: the runtime as it was when the TrainJob was first built
(docs/upstream-behaviour.md#when-objects-are-re-applied)."""

from typing import Any

from ..api.runtime import RuntimeModels, runtime_model
from ..api.trainjob import TrainJob
from ..codec import yamltext
from .errors import BuildError
from .framework import ChildKind, Manifest, Mode
from .info import RuntimeSource
from .manifests import owned_metadata

SNAPSHOT_KEY = "runtime"
SNAPSHOT_KIND = ChildKind(
    "v1",
    "ConfigMap",
    "configmaps",
    Mode.CREATE_ONCE,
    purpose="runtime snapshot ConfigMaps (created once, read back when the runtime is gone)",
)
"""The one child the core writes itself (not a plugin): listed first among the kinds."""


def snapshot_name(job: TrainJob) -> str:
    return f"{job.name}-runtime-snapshot"


def build_snapshot(job: TrainJob, runtime: RuntimeSource) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": owned_metadata(job, snapshot_name(job)),
        "data": {SNAPSHOT_KEY: runtime.snapshot_yaml},
    }


def runtime_from_snapshot(job: TrainJob, configmap: dict[str, Any], models: RuntimeModels) -> RuntimeSource:
    """The runtime saved in `configmap`, parsed with the framework's `models` (`Framework.runtime_models`: a framework
    plugin's `mlPolicy` source survives), after checking it belongs to `job` and matches its runtimeRef."""
    owners = (configmap.get("metadata") or {}).get("ownerReferences") or []
    controller = next((o for o in owners if o.get("controller")), None)
    if controller is None or controller.get("uid") != job.metadata.uid:
        raise BuildError("invalid runtime snapshot: a snapshot configmap exists but is owned by another object")
    text = (configmap.get("data") or {}).get(SNAPSHOT_KEY)
    if text is None:
        raise BuildError(f'invalid runtime snapshot: snapshot ConfigMap missing "{SNAPSHOT_KEY}" data key')
    try:
        raw = yamltext.load(str(text))  # bounded: a ConfigMap anyone can edit is untrusted input
        runtime = runtime_model(raw.get("kind"), models).model_validate(raw)
    except Exception as err:  # a corrupted snapshot is reported, never crashes the operator
        raise BuildError(f"invalid runtime snapshot: {err}") from err
    ref = job.spec.runtime_ref
    group = runtime.api_version.split("/")[0]
    if runtime.metadata.name != ref.name or runtime.kind != ref.kind or group != ref.api_group:
        raise BuildError(
            f"invalid runtime snapshot: snapshot holds {runtime.kind}.{group} {runtime.metadata.name!r}, "
            f"but runtimeRef names {ref.kind}.{ref.api_group} {ref.name!r}"
        )
    return RuntimeSource.of(runtime)
