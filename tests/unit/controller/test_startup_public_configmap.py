"""Start-up (`controller/startup.py`): the SDK's public ConfigMap is created where the operator runs."""

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class PublicConfigMapCase:
    stored: dict[str, Any] | None
    create_fails: int | None
    created: bool


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
    from trainjob_operator.controller.startup import publish_public_configmap
    from trainjob_operator.k8s.client import ApiError
    from trainjob_operator.runtime.startup import public_configmap

    created: list[dict[str, Any]] = []

    class ConfigMaps:
        async def get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
            assert (api_version, kind, name, namespace) == ("v1", "ConfigMap", "kubeflow-trainer-public", "ops")
            return case.stored

        async def create(self, body: dict[str, Any], field_manager: str) -> dict[str, Any]:
            if case.create_fails is not None:
                raise ApiError(case.create_fails, "Conflict", "no")
            created.append(body)
            return body

    asyncio.run(publish_public_configmap(ConfigMaps(), "ops"))  # type: ignore[arg-type]
    assert created == ([public_configmap("ops")] if case.created else [])
    assert public_configmap("ops")["data"] == {"kubeflow_trainer_version": "v2.3.0"}
