"""The runtimes on the real nodes (hack/harness/realexamples.py) and the initializer images' program
(images.INITIALIZE): what `make demo` and tests/realnode change in a runtime, and what an initializer copies."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import images, realexamples, realnodes

REPO = Path(__file__).resolve().parents[3]


def _runtime(
    framework: str, containers: dict[str, list[dict[str, Any]]], volumes: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "kind": "TrainingRuntime",
        "metadata": {"name": "r", "labels": {"trainer.kubeflow.org/framework": framework}},
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": job,
                            "template": {"spec": {"template": {"spec": {"containers": cs, "volumes": volumes}}}},
                        }
                        for job, cs in containers.items()
                    ]
                }
            }
        },
    }


ON_REAL_NODES = {"nodeSelector": realnodes.REAL_NODE_SELECTOR, "tolerations": [realnodes.REAL_NODE_TOLERATION]}
SHARED = {"name": "initializer", "emptyDir": {}}
CLAIMED = {"name": "initializer", "persistentVolumeClaim": {"claimName": "claim"}}
SOURCE_VOLUME = {
    "name": "initializer-source",
    "configMap": {
        "name": "initializer-source",
        "items": [
            {"key": "f0", "path": "hf/meta-llama/Llama-3.2-1B-Instruct/config.json"},
            {"key": "f1", "path": "hf/tatsu-lab/alpaca/train.jsonl"},
        ],
    },
}
SOURCE_MOUNT = {"name": "initializer-source", "mountPath": "/source", "readOnly": True}


def _built(name: str, extra_env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "image": f"ref/{name}",
        "imagePullPolicy": "Never",
        "env": [*(extra_env or []), realexamples.NODE_NAME_ENV],
    }


CASES: dict[str, tuple[dict[str, Any], str | None, list[dict[str, Any]]]] = {
    "a jax runtime's node gets the jax image, pulled Never, on the real nodes": (
        _runtime("jax", {"node": [{"name": "node", "image": "nvcr.io/nvidia/jax"}]}, []),
        None,
        [{**ON_REAL_NODES, "containers": [{"name": "node", **_built("jax")}], "volumes": []}],
    ),
    "torch's container keeps its env and gets what Debian's torch needs here": (
        _runtime("torch", {"node": [{"name": "node", "image": "p", "env": [{"name": "A", "value": "1"}]}]}, []),
        None,
        [
            {
                **ON_REAL_NODES,
                "containers": [
                    {"name": "node", **_built("torch", [{"name": "A", "value": "1"}, *realexamples.IMAGE_ENV["torch"]])}
                ],
                "volumes": [],
            }
        ],
    ),
    "a framework without an image built here keeps its image, still on the real nodes": (
        _runtime("flux", {"node": [{"name": "node", "image": "flux"}]}, []),
        None,
        [{**ON_REAL_NODES, "containers": [{"name": "node", "image": "flux"}], "volumes": []}],
    ),
    "initializers read the local source, and the shared volume becomes the claim in every pod": (
        _runtime(
            "torch",
            {
                "dataset-initializer": [{"name": "dataset-initializer", "image": "ghcr"}],
                "node": [{"name": "node", "image": "p"}],
            },
            [SHARED],
        ),
        "claim",
        [
            {
                **ON_REAL_NODES,
                "containers": [
                    {"name": "dataset-initializer", **_built("dataset-initializer"), "volumeMounts": [SOURCE_MOUNT]}
                ],
                "volumes": [CLAIMED, SOURCE_VOLUME],
            },
            {
                **ON_REAL_NODES,
                "containers": [{"name": "node", **_built("torch", realexamples.IMAGE_ENV["torch"])}],
                "volumes": [CLAIMED],
            },
        ],
    ),
    "without a claim the shared volume stays as the runtime has it": (
        _runtime("torch", {"node": [{"name": "node", "image": "p"}]}, [SHARED]),
        None,
        [
            {
                **ON_REAL_NODES,
                "containers": [{"name": "node", **_built("torch", realexamples.IMAGE_ENV["torch"])}],
                "volumes": [SHARED],
            }
        ],
    ),
}


@pytest.mark.parametrize("runtime, claim, pods", CASES.values(), ids=CASES.keys())
def test_for_real_nodes(runtime: dict[str, Any], claim: str | None, pods: list[dict[str, Any]]) -> None:
    refs = {name: f"ref/{name}" for name in images.RECIPES}
    out = realexamples.for_real_nodes(runtime, refs, shared_claim=claim)
    assert [j["template"]["spec"]["template"]["spec"] for j in out["spec"]["template"]["spec"]["replicatedJobs"]] == (
        pods
    )
    assert out["metadata"] == runtime["metadata"]  # nothing else changes, and the input is not touched
    assert "nodeSelector" not in runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]


def test_every_image_the_examples_need_has_a_recipe() -> None:
    docs = [
        d
        for path in [*sorted((REPO / "runtimes").glob("*.yaml")), REPO / "examples" / "initializers.yaml"]
        for d in yaml.safe_load_all(path.read_text())
        if d and d["kind"].endswith("TrainingRuntime")
    ]
    needed = realexamples.images_needed(docs)
    assert set(needed) == {"torch", "dataset-initializer", "model-initializer", "mpi", "jax", "xgboost", "tensorflow"}
    assert set(needed) <= set(images.RECIPES)


def _initialize(tmp_path: Path, uri: str, kind: str = "dataset") -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "STORAGE_URI": uri,
        "INITIALIZER_SOURCE": str(tmp_path / "source"),
        "INITIALIZER_DEST": str(tmp_path / "out" / kind),
    }
    return subprocess.run(
        ["sh", "-c", images.INITIALIZE, "initialize", kind], env=env, capture_output=True, text=True, check=False
    )


def test_the_initializer_copies_the_uri_from_the_local_source(tmp_path: Path) -> None:
    source = tmp_path / "source" / "hf" / "org" / "set"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_text("abc")
    (source / "sub" / "b.txt").write_text("de")
    done = _initialize(tmp_path, "hf://org/set")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"initializer: dataset hf://org/set -> {tmp_path}/out/dataset files=2 bytes=5\n"
    assert (tmp_path / "out" / "dataset" / "sub" / "b.txt").read_text() == "de"


@pytest.mark.parametrize(
    "uri, code, message",
    [
        ("hf://org/absent", 1, "initializer: hf://org/absent is not in the local source"),
        ("no-scheme", 2, "initializer: STORAGE_URI no-scheme is not scheme://path"),
    ],
)
def test_the_initializer_refuses_what_it_cannot_copy(tmp_path: Path, uri: str, code: int, message: str) -> None:
    done = _initialize(tmp_path, uri)
    assert (done.returncode, done.stderr.startswith(message)) == (code, True), done.stderr


def test_each_image_lock_is_compiled_from_its_input() -> None:
    inputs = sorted((REPO / "requirements" / "images").glob("*.in"))
    assert inputs and all(p.with_suffix(".txt").is_file() for p in inputs)
    for name, recipe in images.RECIPES.items():
        if "pip" in recipe:
            assert images.lock_subset((REPO / recipe["pip"]["lock"]).read_text(), recipe["pip"]["roots"]), name
