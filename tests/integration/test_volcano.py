"""Volcano gang scheduling on the real API server, with the PodGroup CRD generated from Volcano's own Go types
(volcano.sh/apis, hack/harness/tools/volcano): the operator's full PodGroup — queue, priority class and network
topology — is accepted as a Volcano install would accept it."""

from __future__ import annotations

import pytest

from builders import torch_runtime as runtime
from builders import trainjob_object as trainjob
from operator_fixtures import Kube, OperatorProcess, eventually
from trainjob_operator.api import constants as c

pytestmark = pytest.mark.cluster


def test_volcano_podgroup_with_queue_and_network_topology_is_applied(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    volcano_runtime = runtime(namespace, name="volcano")
    volcano_runtime["spec"]["podGroupPolicy"] = {
        "volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}
    }
    # The queue comes from the JobSet template's annotations (a runtime's, or a TrainJob's runtime patch).
    volcano_runtime["spec"]["template"]["metadata"] = {"annotations": {c.VOLCANO_QUEUE_NAME_ANNOTATION: "research"}}
    job = trainjob(namespace, "gang", runtime_name="volcano", suspend=True, trainer={"numNodes": 2})
    kube.apply(volcano_runtime, job)

    pod_group = eventually(
        lambda: kube.get("podgroups.scheduling.volcano.sh", "gang", namespace), "the Volcano PodGroup"
    )
    assert pod_group["spec"]["queue"] == "research"
    assert pod_group["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 2}
    assert pod_group["spec"]["minMember"] == 2
    assert pod_group["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    jobset = eventually(lambda: kube.get("jobset", "gang", namespace), "the JobSet")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"][c.VOLCANO_GROUP_NAME_ANNOTATION] == "gang"
