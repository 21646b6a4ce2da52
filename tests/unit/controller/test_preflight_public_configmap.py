"""Start-up (`controller/preflight.py`): the SDK's public ConfigMap is created where the operator runs."""

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from fake_client import FakeClient, as_sent


@dataclass
class PublicConfigMapCase:
    stored: dict[str, Any] | None
    create_fails: int | None
    created: bool


NAME = "kubeflow-trainer-public"
PUBLIC_CONFIGMAP_CASES = [
    pytest.param(PublicConfigMapCase(None, None, True), id="missing: created with the version the SDK checks"),
    pytest.param(
        PublicConfigMapCase({"data": {"kubeflow_trainer_version": "v2.4.0"}}, None, False),
        id="present (the chart's): left as it is",
    ),
    pytest.param(PublicConfigMapCase(None, 409, False), id="another replica created it first: fine"),
    pytest.param(PublicConfigMapCase(None, 403, False), id="forbidden: a warning, the operator goes on"),
]


@pytest.mark.parametrize("case", PUBLIC_CONFIGMAP_CASES)
def test_the_sdks_configmap_is_created_where_the_operator_runs(case: PublicConfigMapCase) -> None:
    from trainjob_operator.controller.preflight import publish_public_configmap
    from trainjob_operator.k8s.client import ApiError
    from trainjob_operator.runtime.startup import public_configmap

    client = FakeClient()
    if case.stored is not None:
        client.put(
            {"apiVersion": "v1", "kind": "ConfigMap", **case.stored, "metadata": {"name": NAME, "namespace": "ops"}}
        )
    if case.create_fails is not None:
        client.fail("create", ApiError(case.create_fails, "Conflict", "no"))

    asyncio.run(publish_public_configmap(client, "ops"))
    assert (as_sent(client.stored("v1", "ConfigMap", NAME, "ops")) == public_configmap("ops")) is case.created
    assert public_configmap("ops")["data"] == {"kubeflow_trainer_version": "v2.3.0"}
