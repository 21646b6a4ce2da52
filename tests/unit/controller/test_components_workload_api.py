"""Start-up (`controller/components.py`, the preflight step): with the Workload API's gate on, discovery of
`scheduling.k8s.io/v1beta1` before the webhooks serve; when the API server does not serve it the operator says so once
and the plugin refuses TrainJobs of runtimes with `spec.scheduling` (runtime/plugins/workload.py)."""

import asyncio

import pytest
import structlog

from fake_client import FakeClient
from trainjob_operator.config import OperatorConfig
from trainjob_operator.controller.components import workload_api
from trainjob_operator.controller.manager import Manager
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plugins.workload import GATE, WorkloadScheduling
from trainjob_operator.runtime.registry import gated

DISCOVERY = ("GET", "/apis/scheduling.k8s.io/v1beta1")
SERVED = {"resources": [{"name": "workloads"}, {"name": "podgroups"}, {"name": "podgroups/status"}]}

CASES = {
    "the gate off: nothing is asked, nothing said": (False, None, 0, True),
    "the API not served (Kubernetes 1.36, or 1.37 without GenericWorkload): said once, refused": (True, None, 1, False),
    "the API served: nothing said, admitted": (True, SERVED, 0, True),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_workload_api_is_discovered_once_at_start_up(case: str) -> None:
    gate, answer, warnings, served = CASES[case]
    client = FakeClient(responses={DISCOVERY: answer} if answer is not None else {})
    framework = Framework.from_registry(gated({GATE: gate}))
    manager = Manager(OperatorConfig(feature_gates={GATE: gate}), client, framework=framework)
    with structlog.testing.capture_logs() as logs:
        asyncio.run(workload_api(manager))
    said = [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(said) == warnings
    assert all("does not serve workloads and podgroups of scheduling.k8s.io/v1beta1" in e["event"] for e in said)
    assert [c for c in client.calls if c == ("request", *DISCOVERY)] == ([("request", *DISCOVERY)] if gate else [])
    (plugin,) = [p for p in framework.plugins if isinstance(p, WorkloadScheduling)]
    assert plugin.api_served is served
