"""Runtimes on the real nodes (issue 23): what `make demo` and tests/realnode change in a runtime so its pods run
here, for real, and nothing more.

- every pod template lands on the real nodes (their label and taint: `realnodes.REAL_NODE_SELECTOR`/`TOLERATION`);
- every container's registry image becomes the image built here for the runtime's framework (`FRAMEWORK_IMAGES`,
  by the runtime's `trainer.kubeflow.org/framework` label) or for the container (`CONTAINER_IMAGES`: the
  initializers), pulled `Never` (there is no registry);
- the initializers' download source is local (no network): the ConfigMap `INITIALIZER_SOURCE` mounted at
  `/source`, where the initializer images built here look up `scheme://path` (`images.INITIALIZE`);
- a volume named `initializer` (the shared volume of the initializer shape) becomes the PersistentVolumeClaim the
  caller names: the dataset initializer, the model initializer and the trainer pods share it across nodes. The
  local control plane has no provisioner, so `shared_volume` gives a PersistentVolume of a host directory, bound
  to that claim up front (every real node is this machine, so all of them see the same directory).

Commands, probes, security contexts and mlPolicy stay as shipped. Pure: no I/O."""

from __future__ import annotations

import copy
import json
from typing import Any

from harness import realnodes

FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
#: framework label -> the image built here (images.RECIPES) that stands in for the runtime's registry image.
FRAMEWORK_IMAGES = {
    "torch": "torch",
    "deepspeed": "mpi",
    "mlx": "mpi",
    "horovod": "mpi",
    "jax": "jax",
    "xgboost": "xgboost",
    "tensorflow": "tensorflow",
}
#: What an image built here needs in its containers' env on these nodes (added to the runtime's, never to the
#: operator's): Debian's torch 1.13 on Python 3.11 fails to parse torchrun's default `--redirects 0`/`--tee 0`
#: (tests/realnode/real_runtimes.py says why), and gloo must use the pod's interface.
IMAGE_ENV = {
    "torch": [
        {"name": "GLOO_SOCKET_IFNAME", "value": "eth0"},
        {"name": "PET_REDIRECTS", "value": "1"},
        {"name": "PET_TEE", "value": "1"},
    ],
}
#: Every container learns the node it runs on (the demo and the tests print it).
NODE_NAME_ENV = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
#: container name -> image built here, before the framework's.
CONTAINER_IMAGES = {"dataset-initializer": "dataset-initializer", "model-initializer": "model-initializer"}
INITIALIZER_CONTAINERS = frozenset(CONTAINER_IMAGES)
SHARED_VOLUME = "initializer"
INITIALIZER_SOURCE = "initializer-source"
SOURCE_MOUNT = "/source"


def image_name(runtime: dict[str, Any], container: str) -> str | None:
    """The image built here for `container` of `runtime` (None: the runtime's framework has none)."""
    if container in CONTAINER_IMAGES:
        return CONTAINER_IMAGES[container]
    framework = ((runtime.get("metadata") or {}).get("labels") or {}).get(FRAMEWORK_LABEL, "")
    return FRAMEWORK_IMAGES.get(framework)


def images_needed(runtimes: list[dict[str, Any]]) -> list[str]:
    """The images built here that `runtimes` run, in first-use order."""
    needed: list[str] = []
    for runtime in runtimes:
        for pod in _pods(runtime):
            for container in [*(pod.get("initContainers") or []), *pod.get("containers", [])]:
                name = image_name(runtime, container["name"])
                if name is not None and name not in needed:
                    needed.append(name)
    return needed


def _pods(runtime: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        job["template"]["spec"]["template"]["spec"]
        for job in (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
    ]


def for_real_nodes(runtime: dict[str, Any], refs: dict[str, str], shared_claim: str | None = None) -> dict[str, Any]:
    """A copy of `runtime` whose pods run on the real nodes with the images `refs` (image name -> reference) and,
    when `shared_claim` is given, its `initializer` volume as that PersistentVolumeClaim (module docstring)."""
    out = copy.deepcopy(runtime)
    for pod in _pods(out):
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **realnodes.REAL_NODE_SELECTOR}
        pod["tolerations"] = [*(pod.get("tolerations") or []), realnodes.REAL_NODE_TOLERATION]
        initializes = False
        for container in [*(pod.get("initContainers") or []), *pod.get("containers", [])]:
            name = image_name(out, container["name"])
            if name is not None and name in refs:
                container["image"] = refs[name]
                container["imagePullPolicy"] = "Never"
                container["env"] = [*(container.get("env") or []), *IMAGE_ENV.get(name, []), NODE_NAME_ENV]
            if container["name"] in INITIALIZER_CONTAINERS:
                initializes = True
                container["volumeMounts"] = [
                    *(container.get("volumeMounts") or []),
                    {"name": INITIALIZER_SOURCE, "mountPath": SOURCE_MOUNT, "readOnly": True},
                ]
        volumes = pod.get("volumes") or []
        if shared_claim is not None:
            volumes = [
                {"name": v["name"], "persistentVolumeClaim": {"claimName": shared_claim}}
                if v["name"] == SHARED_VOLUME
                else v
                for v in volumes
            ]
        if initializes:
            volumes = [
                *volumes,
                {"name": INITIALIZER_SOURCE, "configMap": {"name": INITIALIZER_SOURCE, "items": _source_items()}},
            ]
        if volumes:
            pod["volumes"] = volumes
    return out


#: The initializers' local source, as `scheme/path/file` (a STORAGE_URI `scheme://path`, then a file) -> text: a
#: tiny stand-in for each URI of examples/initializers.yaml (no network here; the format is the initializer's).
SOURCE_FILES = {
    "hf/tatsu-lab/alpaca/train.jsonl": "".join(
        json.dumps({"instruction": f"Add {a} and {a + 1}.", "output": str(2 * a + 1)}) + "\n" for a in range(8)
    ),
    "hf/meta-llama/Llama-3.2-1B-Instruct/config.json": '{"model_type": "llama", "hidden_size": 16, "num_layers": 2}\n',
}


def _source_items() -> list[dict[str, str]]:
    return [{"key": f"f{i}", "path": path} for i, path in enumerate(sorted(SOURCE_FILES))]


def source_configmap() -> dict[str, Any]:
    """The ConfigMap of SOURCE_FILES (its keys flat; the volume's items lay them out as paths)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": INITIALIZER_SOURCE},
        "data": {item["key"]: SOURCE_FILES[item["path"]] for item in _source_items()},
    }


def shared_volume(claim: str, namespace: str, host_path: str, pv_name: str) -> list[dict[str, Any]]:
    """A PersistentVolume of the host directory `host_path` bound up front to the claim `claim` in `namespace`,
    and that claim (ReadWriteMany: pods on both real nodes mount it)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv_name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": {"namespace": namespace, "name": claim},
                "hostPath": {"path": host_path, "type": "Directory"},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": pv_name,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    ]
