"""Initializers for real (issue 23): examples/initializers.yaml as shipped (the dataset initializer, then the model
initializer, then 2 trainer nodes, in order through dependsOn), on the real nodes with the images built here. The
initializers "download" the TrainJob's storage URIs from a local source (no network: the ConfigMap of
`realexamples.SOURCE_FILES` at /source) into the shared `initializer` volume (a claim on a host directory, which
both real nodes see), and each trainer pod reports what it found there."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from framework_runtimes import run_to_end

from harness import realexamples, realnodes
from operator_fixtures import Kube, OperatorProcess

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("dataset-initializer", "model-initializer", "torch")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "initializers.yaml"


@pytest.fixture
def shared_dir(namespace: str) -> Iterator[Path]:
    path = Path("/tmp") / f"trainjob-realnode-initializer-{namespace}"
    path.mkdir(mode=0o777, exist_ok=True)
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _bytes(prefix: str) -> int:
    return sum(len(text.encode()) for path, text in realexamples.SOURCE_FILES.items() if path.startswith(prefix))


def test_initializers_fill_the_shared_volume_the_trainers_read(
    kube: Kube, operator: OperatorProcess, namespace: str, shared_dir: Path
) -> None:
    runtime, trainjob = yaml.safe_load_all(EXAMPLE.read_text())
    refs = {name: realnodes.load_image(kube.cluster, name) for name in realexamples.images_needed([runtime])}
    assert set(refs) == {"dataset-initializer", "model-initializer", "torch"}
    pv = f"initializer-{namespace}"
    kube.apply(*realexamples.shared_volume("initializer", namespace, str(shared_dir), pv))
    try:
        kube.apply(realexamples.source_configmap(), namespace=namespace)
        kube.create(realexamples.for_real_nodes(runtime, refs, shared_claim="initializer"), namespace)
        run = run_to_end(kube, namespace, trainjob, timeout=300)
    finally:
        kube.delete("persistentvolume", pv)
    assert run.complete(), (run.job.get("status"), run.logs)
    run.assert_ran_for_real()

    by_step: dict[str, list[dict[str, Any]]] = {}
    for pod in run.pods.values():
        by_step.setdefault(pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"], []).append(pod)
    assert sorted((step, len(pods)) for step, pods in by_step.items()) == [
        ("dataset-initializer", 1),
        ("model-initializer", 1),
        ("node", 2),
    ]
    dataset, model = _bytes("hf/tatsu-lab/alpaca/"), _bytes("hf/meta-llama/")
    logs = "\n".join(run.logs.values())
    assert f"initializer: dataset hf://tatsu-lab/alpaca -> /workspace/dataset files=1 bytes={dataset}" in logs, logs
    assert (
        f"initializer: model hf://meta-llama/Llama-3.2-1B-Instruct -> /workspace/model files=1 bytes={model}" in logs
    ), logs
    # Both trainer pods, whichever node each ran on, read the same files from the shared volume.
    found = sorted(
        re.findall(r"trainer node=(\d) dataset: files=(\d+) bytes=(\d+) model: files=(\d+) bytes=(\d+)", logs)
    )
    assert found == [(rank, "1", str(dataset), "1", str(model)) for rank in ("0", "1")], logs

    # In order: each step started after the one it depends on finished.
    def started(step: str) -> str:
        return str(min(p["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"] for p in by_step[step]))

    def ended(step: str) -> str:
        return str(max(p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] for p in by_step[step]))

    assert ended("dataset-initializer") <= started("model-initializer") <= ended("model-initializer") <= started("node")
    print(f"initializers + 2 trainers: Complete {run.seconds:.1f}s after the TrainJob was created")
