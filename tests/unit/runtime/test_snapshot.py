"""The runtime snapshot ConfigMap (`runtime/snapshot.py`): it round-trips and guards its ownership."""

import pytest

from builders import RuntimeBuilder, TrainJobBuilder
from trainjob_operator.api.runtime import SHIPPED_MODELS
from trainjob_operator.runtime.errors import BuildError
from trainjob_operator.runtime.snapshot import build_snapshot, runtime_from_snapshot


def test_snapshot_round_trips_and_guards_ownership() -> None:
    job = TrainJobBuilder.make().obj()
    runtime = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}).template_labels(marker="v1").source()
    configmap = build_snapshot(job, runtime)
    assert configmap["metadata"]["name"] == "test-job-runtime-snapshot"
    assert "kind: TrainingRuntime" in configmap["data"]["runtime"]
    restored = runtime_from_snapshot(job, configmap, SHIPPED_MODELS)
    assert (restored.kind, restored.name, restored.spec) == (runtime.kind, runtime.name, runtime.spec)

    stolen = {
        **configmap,
        "metadata": {
            **configmap["metadata"],
            "ownerReferences": [{**configmap["metadata"]["ownerReferences"][0], "uid": "other"}],
        },
    }
    with pytest.raises(BuildError, match="owned by another object"):
        runtime_from_snapshot(job, stolen, SHIPPED_MODELS)
    with pytest.raises(BuildError, match='missing "runtime" data key'):
        runtime_from_snapshot(job, {**configmap, "data": {}}, SHIPPED_MODELS)
    other = TrainJobBuilder.make(runtime="another").obj()
    with pytest.raises(BuildError, match="runtimeRef names"):
        runtime_from_snapshot(other, configmap, SHIPPED_MODELS)
