"""The shipped jax/xgboost/tensorflow runtimes and the initializer shape on the real nodes (tests/realnode), and one
helper that runs a TrainJob to its end and gathers what its pods wrote."""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any

import yaml
from real_runtimes import _on_real_nodes, _shipped, finished

from harness import realexamples, realnodes
from operator_fixtures import Kube, condition

FRAMEWORK_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "frameworks.yaml"


def real_node_framework_runtime(file: str, image: str, name: str) -> dict[str, Any]:
    """The shipped runtime in `runtimes/<file>` (a single `node` job: jax-, xgboost-, tensorflow-distributed) as the
    namespaced TrainingRuntime `name`, on the real nodes with the image `image` built here (as `make demo` runs it:
    `realexamples.for_real_nodes`), one pod per node. Everything else of the shape stays: the restricted security
    contexts, uid 1000, /workspace and HOME."""
    runtime = _shipped(file, name)
    framework = runtime["metadata"]["labels"][realexamples.FRAMEWORK_LABEL]
    runtime = realexamples.for_real_nodes(runtime, {realexamples.FRAMEWORK_IMAGES[framework]: image})
    [job] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    _on_real_nodes(job["template"]["spec"]["template"]["spec"], job["name"])
    return runtime


def example_trainjob(example: str, name: str, runtime: str) -> dict[str, Any]:
    """The TrainJob `example` of examples/frameworks.yaml as `name`, of the namespaced runtime `runtime`."""
    [job] = [d for d in yaml.safe_load_all(FRAMEWORK_EXAMPLES.read_text()) if d["metadata"]["name"] == example]
    job["metadata"] = {"name": name}
    job["spec"]["runtimeRef"] = {"name": runtime, "kind": "TrainingRuntime"}
    return dict(job)


@dataclasses.dataclass
class Run:
    job: dict[str, Any]
    #: pod name -> pod, and pod name -> its log (every container)
    pods: dict[str, dict[str, Any]]
    logs: dict[str, str]
    seconds: float

    def complete(self) -> bool:
        return condition(self.job, "Complete") is not None

    def assert_ran_for_real(self) -> None:
        """Every pod ran its containers in containerd on a real node."""
        for name, pod in self.pods.items():
            assert pod["spec"]["nodeName"].startswith("real-node-"), (name, pod["spec"].get("nodeName"))
            for status in pod["status"].get("containerStatuses") or []:
                assert status["containerID"].startswith("containerd://"), (name, status)


def run_to_end(kube: Kube, namespace: str, trainjob: dict[str, Any], timeout: float) -> Run:
    """Create `trainjob`, wait until it is Complete or Failed, return it with its pods and their logs."""
    name = trainjob["metadata"]["name"]
    created = time.monotonic()
    kube.create(trainjob, namespace)
    job = finished(kube, name, namespace, timeout=timeout)
    seconds = time.monotonic() - created
    pods = {
        p["metadata"]["name"]: p
        for p in kube.items("pods", namespace)
        if p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == name
    }
    logs = {pod: kube.run("logs", "-n", namespace, pod, "--all-containers", check=False).stdout for pod in sorted(pods)}
    return Run(job=job, pods=pods, logs=logs, seconds=seconds)


def run_framework_example(
    kube: Kube, namespace: str, *, image: str, runtime_file: str, example: str, name: str, timeout: float
) -> Run:
    """The example TrainJob `example` of examples/frameworks.yaml as `name`, of the shipped runtime
    `runtimes/<runtime_file>` on the real nodes with the image `image` built here (loaded first); it must have
    completed with every pod in containerd on a real node."""
    ref = realnodes.load_image(kube.cluster, image)
    kube.create(real_node_framework_runtime(runtime_file, ref, f"{name}-real"), namespace)
    run = run_to_end(kube, namespace, example_trainjob(example, name, f"{name}-real"), timeout)
    assert run.complete(), (run.job.get("status"), run.logs)
    run.assert_ran_for_real()
    return run


def framework_reports(run: Run, pattern: re.Pattern[str]) -> list[tuple[str, ...]]:
    """Every match of `pattern` in the run's logs, as its groups, sorted."""
    return sorted(m.groups() for log in run.logs.values() for m in pattern.finditer(log))
