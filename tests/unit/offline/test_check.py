"""`validate`'s pruning schema for runtimes: the shipped CRD's, with a framework plugin's `mlPolicy` source the
shipped CRD lacks kept whole (its model parses it next)."""

from typing import Any

import pytest

from trainjob_operator.api import constants as c
from trainjob_operator.api.rules import ML_POLICIES
from trainjob_operator.offline.check import crd_schema, runtime_schema
from trainjob_operator.runtime.pipeline import Framework

RUNTIME_KINDS = (c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND)


def ml_policy(schema: dict[str, Any] | None) -> dict[str, Any]:
    assert schema is not None
    policy: dict[str, Any] = schema["properties"]["spec"]["properties"]["mlPolicy"]
    return policy


@pytest.mark.parametrize("kind", [*RUNTIME_KINDS, c.TRAINJOB_KIND])
def test_the_shipped_registry_prunes_by_the_shipped_crd_itself(kind: str) -> None:
    assert runtime_schema(kind, Framework.from_registry().one_ml_policy_sources()) is crd_schema(kind)


@pytest.mark.parametrize("kind", RUNTIME_KINDS)
def test_a_source_the_shipped_crd_lacks_is_kept_whole_and_nothing_else_changes(kind: str) -> None:
    shipped, extended = crd_schema(kind), runtime_schema(kind, (*ML_POLICIES, "toy"))
    assert ml_policy(extended)["properties"] == {
        **ml_policy(shipped)["properties"],
        "toy": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }
    assert {k: v for k, v in ml_policy(extended).items() if k != "properties"} == {
        k: v for k, v in ml_policy(shipped).items() if k != "properties"
    }
    assert extended is not None and shipped is not None
    assert {k: v for k, v in extended["properties"]["spec"]["properties"].items() if k != "mlPolicy"} == {
        k: v for k, v in shipped["properties"]["spec"]["properties"].items() if k != "mlPolicy"
    }
    assert "toy" not in ml_policy(crd_schema(kind))["properties"]  # the cached shipped schema is not changed
