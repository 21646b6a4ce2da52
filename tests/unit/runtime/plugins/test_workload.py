"""WorkloadScheduling (runtime/plugins/workload.py): the Workload, its PodGroups and the pods' links a runtime's
`spec.scheduling` asks for, and the admission rules, as tables keyed by sentences."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import FixedKeys, RuntimeBuilder, TrainJobBuilder, by_kind, container, jobset_of, pod_spec, replicated_job
from trainjob_operator.api import constants as c
from trainjob_operator.runtime.errors import BuildError
from trainjob_operator.runtime.observed import NOTHING, ObjectRef, Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plugins.workload import (
    API_VERSION,
    GATE,
    POD_GROUP_KIND,
    WORKLOAD_KIND,
    WorkloadScheduling,
    api_missing,
)
from trainjob_operator.runtime.registry import GATES, PLUGINS, gated

ON = Framework.from_registry(gated({GATE: True}))
OFF = Framework.from_registry()


def without_the_api() -> Framework:
    """The gate on, and the start-up discovery found no Workload API (controller/components.py sets this)."""
    framework = Framework.from_registry(gated({GATE: True}))
    for plugin in framework.plugins:
        if isinstance(plugin, WorkloadScheduling):
            plugin.api_served = False
    return framework


NO_API = without_the_api()

TORCH = RuntimeBuilder.make(name="torch").ml_policy(num_nodes=1, torch={})
"""dataset-initializer, model-initializer and node, none waiting for another."""
SEQUENCED = TORCH.job(c.NODE, "dependsOn", [{"name": c.DATASET_INITIALIZER, "status": "Complete"}])
NODE_ONLY = TORCH.jobs([replicated_job(c.NODE, c.ANCESTOR_TRAINER, [container(c.NODE)])])
MPI = (
    RuntimeBuilder.make(name="mpi")
    .ml_policy(num_nodes=1, mpi={"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "runLauncherAsNode": False})
    .jobs(
        [
            replicated_job("launcher", c.ANCESTOR_TRAINER, [container(c.NODE)]),
            replicated_job(c.NODE, None, [container(c.NODE)]),
        ]
    )
)
JOB = TrainJobBuilder.make(name="tj", runtime="torch").trainer(numNodes=4)


def gang(n: int) -> dict[str, Any]:
    return {"gang": {"minCount": n}}


@dataclass
class BuildCase:
    runtime: RuntimeBuilder
    scheduling: dict[str, Any]
    templates: list[dict[str, Any]]
    """The Workload's podGroupTemplates."""
    pod_groups: dict[str, str]
    """Replicated job -> the PodGroup its pods name."""
    job: TrainJobBuilder = JOB


BUILD = {
    "a TrainJob-level gang holds every pod of the TrainJob: 1 + 1 initializer pods and numNodes trainers": BuildCase(
        TORCH,
        {"schedulingPolicy": {"gang": {}}},
        [{"name": "tj", "schedulingPolicy": gang(6)}],
        {c.DATASET_INITIALIZER: "tj", c.MODEL_INITIALIZER: "tj", c.NODE: "tj"},
    ),
    "an empty scheduling means a TrainJob-level gang": BuildCase(
        NODE_ONLY, {}, [{"name": "tj", "schedulingPolicy": gang(4)}], {c.NODE: "tj"}
    ),
    "numNodes sizes the gang: the runtime's mlPolicy.numNodes when the TrainJob names none": BuildCase(
        NODE_ONLY.ml_policy(num_nodes=3, torch={}),
        {},
        [{"name": "tj", "schedulingPolicy": gang(3)}],
        {c.NODE: "tj"},
        TrainJobBuilder.make(name="tj", runtime="torch"),
    ),
    "replicated jobs that wait for others (dependsOn) get one gang each: one over all would never fill": BuildCase(
        SEQUENCED,
        {"schedulingPolicy": {"gang": {}}},
        [
            {"name": c.DATASET_INITIALIZER, "schedulingPolicy": gang(1)},
            {"name": c.MODEL_INITIALIZER, "schedulingPolicy": gang(1)},
            {"name": c.NODE, "schedulingPolicy": gang(4)},
        ],
        {
            c.DATASET_INITIALIZER: "tj-dataset-initializer",
            c.MODEL_INITIALIZER: "tj-model-initializer",
            c.NODE: "tj-node",
        },
    ),
    "replicatedJobs: one group per entry, named after its targets; basic initializers, a gang of trainers": BuildCase(
        SEQUENCED,
        {
            "replicatedJobs": [
                {
                    "targetReplicatedJobs": [c.MODEL_INITIALIZER, c.DATASET_INITIALIZER],
                    "schedulingPolicy": {"basic": {}},
                },
                {"targetReplicatedJobs": [c.NODE]},
            ]
        },
        [
            {"name": "dataset-initializer-model-initializer", "schedulingPolicy": {"basic": {}}},
            {"name": c.NODE, "schedulingPolicy": gang(4)},
        ],
        {
            c.DATASET_INITIALIZER: "tj-dataset-initializer-model-initializer",
            c.MODEL_INITIALIZER: "tj-dataset-initializer-model-initializer",
            c.NODE: "tj-node",
        },
    ),
    "an MPI launcher and its nodes in one entry are one gang of numNodes + 1": BuildCase(
        MPI,
        {"replicatedJobs": [{"targetReplicatedJobs": ["launcher", c.NODE]}]},
        [{"name": "launcher-node", "schedulingPolicy": gang(4)}],
        {"launcher": "tj-launcher-node", c.NODE: "tj-launcher-node"},
        TrainJobBuilder.make(name="tj", runtime="mpi").trainer(numNodes=3),
    ),
    "a replicated job of several Jobs counts the pods of every Job": BuildCase(
        NODE_ONLY.jobs(
            [
                replicated_job(c.NODE, c.ANCESTOR_TRAINER, [container(c.NODE)]),
                replicated_job("ps", None, [container("ps")], replicas=3),
            ]
        ),
        {},
        [{"name": "tj", "schedulingPolicy": gang(7)}],
        {c.NODE: "tj", "ps": "tj"},
    ),
    "topology constraints and the disruption mode are copied to the template": BuildCase(
        NODE_ONLY,
        {
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
            "disruptionMode": {"all": {}},
        },
        [
            {
                "name": "tj",
                "schedulingPolicy": gang(4),
                "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
                "disruptionMode": {"all": {}},
            }
        ],
        {c.NODE: "tj"},
    ),
}


@pytest.mark.parametrize("case", BUILD.values(), ids=BUILD.keys())
def test_build(case: BuildCase) -> None:
    objects = ON.desired_objects(
        case.job.obj(), case.runtime.set("spec.scheduling", case.scheduling).source(), Observed(keys=FixedKeys())
    )
    (workload,) = by_kind(objects, WORKLOAD_KIND)
    job = case.job.obj()
    assert workload == {
        "apiVersion": API_VERSION,
        "kind": WORKLOAD_KIND,
        "metadata": {
            "name": "tj",
            "namespace": "default",
            "ownerReferences": [
                {
                    "apiVersion": c.API_VERSION,
                    "kind": c.TRAINJOB_KIND,
                    "name": "tj",
                    "controller": True,
                    "blockOwnerDeletion": True,
                    "uid": job.metadata.uid,
                }
            ],
        },
        "spec": {
            "controllerRef": {"apiGroup": c.GROUP, "kind": c.TRAINJOB_KIND, "name": "tj"},
            "podGroupTemplates": case.templates,
        },
    }
    groups = by_kind(objects, POD_GROUP_KIND)
    assert [g["spec"]["workloadRef"] for g in groups] == [
        {"workloadName": "tj", "templateName": t["name"]} for t in case.templates
    ]
    assert [g["spec"]["schedulingPolicy"] for g in groups] == [t["schedulingPolicy"] for t in case.templates]
    assert all(g["metadata"]["ownerReferences"] == workload["metadata"]["ownerReferences"] for g in groups)
    assert sorted({g["metadata"]["name"] for g in groups}) == sorted(set(case.pod_groups.values()))
    jobset = jobset_of(objects)
    assert {
        rj["name"]: pod_spec(jobset, rj["name"]).get("schedulingGroup") for rj in jobset["spec"]["replicatedJobs"]
    } == {name: {"podGroupName": group} for name, group in case.pod_groups.items()}
    kinds = [o["kind"] for o in objects]
    assert kinds.index(WORKLOAD_KIND) < kinds.index(POD_GROUP_KIND) < kinds.index(c.JOBSET_KIND), (
        "written before the pods"
    )


def test_a_runtime_without_scheduling_builds_exactly_what_it_builds_without_the_plugin() -> None:
    without = {name: plugin for name, plugin in PLUGINS.items() if name != "WorkloadScheduling"}
    for runtime in (TORCH, SEQUENCED, MPI):
        job = JOB.obj()
        keys = Observed(keys=FixedKeys())
        assert ON.desired_objects(job, runtime.source(), keys) == Framework.from_registry(without).desired_objects(
            job, runtime.source(), keys
        )


def test_objects_that_exist_are_not_written_again_and_suspend_keeps_them() -> None:
    runtime = TORCH.set("spec.scheduling", {}).source()
    existing = frozenset({ObjectRef(API_VERSION, WORKLOAD_KIND, "tj"), ObjectRef(API_VERSION, POD_GROUP_KIND, "tj")})
    for job in (JOB, JOB.suspend()):
        objects = ON.desired_objects(job.obj(), runtime, Observed(existing=existing))
        assert by_kind(objects, WORKLOAD_KIND) == [] and by_kind(objects, POD_GROUP_KIND) == []
        assert pod_spec(jobset_of(objects), c.NODE)["schedulingGroup"] == {"podGroupName": "tj"}


def test_with_the_gate_off_a_scheduling_runtime_is_never_built_without_its_gang() -> None:
    with pytest.raises(BuildError, match=f"{GATE} feature gate off"):
        OFF.desired_objects(JOB.obj(), TORCH.set("spec.scheduling", {}).source())


def test_without_the_api_a_scheduling_runtime_is_never_built_and_says_which_api_is_missing() -> None:
    with pytest.raises(BuildError, match=r"does not serve workloads and podgroups of scheduling\.k8s\.io/v1beta1"):
        NO_API.desired_objects(JOB.obj(), TORCH.set("spec.scheduling", {}).source())
    job, keys = JOB.obj(), Observed(keys=FixedKeys())
    assert NO_API.desired_objects(job, TORCH.source(), keys) == ON.desired_objects(job, TORCH.source(), keys)


def test_the_gate_is_known_and_off_by_default() -> None:
    assert GATE in GATES
    plugin = next(p for p in OFF.plugins if isinstance(p, WorkloadScheduling))
    assert plugin.enabled is False


def test_the_kinds_are_created_once_and_optional() -> None:
    kinds = {k.kind: k for k in ON.kinds() if k.api_version == API_VERSION}
    assert set(kinds) == {WORKLOAD_KIND, POD_GROUP_KIND}
    assert all(k.optional and k.mode.value == "create" for k in kinds.values())


# --- admission ---------------------------------------------------------------------------------------------------


@dataclass
class AdmitCase:
    runtime: RuntimeBuilder
    scheduling: dict[str, Any] | None
    messages: list[str] = field(default_factory=list)
    """Substrings, one per expected error (none: admitted)."""
    framework: Framework = ON
    old: TrainJobBuilder | None = None
    new: TrainJobBuilder = JOB


ADMIT = {
    "a TrainJob-level gang is admitted": AdmitCase(TORCH, {"schedulingPolicy": {"gang": {}}}),
    "a runtime without scheduling is admitted with the gate off": AdmitCase(TORCH, None, framework=OFF),
    "on a cluster without the Workload API a scheduling runtime's TrainJob is refused, naming the field and the API": (
        AdmitCase(
            TORCH,
            {},
            [
                "runtime torch sets spec.scheduling (gang scheduling by the Workload API), but this cluster's API "
                "server does not serve workloads and podgroups of scheduling.k8s.io/v1beta1 (needs Kubernetes 1.37"
            ],
            framework=NO_API,
        )
    ),
    "on a cluster without the Workload API a runtime without scheduling is admitted as today": AdmitCase(
        TORCH, None, framework=NO_API
    ),
    "with the gate off a scheduling runtime is refused, saying how to turn it on": AdmitCase(
        TORCH,
        {},
        [
            f"runtime torch sets spec.scheduling (gang scheduling by the Workload API), but this operator runs with its {GATE} feature gate off"
        ],
        OFF,
    ),
    "scheduling and podGroupPolicy are mutually exclusive": AdmitCase(
        TORCH.coscheduling(), {}, ["runtime torch: spec.scheduling and spec.podGroupPolicy are mutually exclusive"]
    ),
    "an explicit gang.minCount is refused: it is computed": AdmitCase(
        TORCH,
        {"schedulingPolicy": {"gang": {"minCount": 2}}},
        ["spec.scheduling.schedulingPolicy.gang.minCount: must not be set (2)"],
    ),
    "basic and gang together are refused": AdmitCase(
        TORCH,
        {"schedulingPolicy": {"gang": {}, "basic": {}}},
        ["spec.scheduling.schedulingPolicy: must set exactly one of basic and gang"],
    ),
    "TrainJob-level fields and replicatedJobs are mutually exclusive": AdmitCase(
        NODE_ONLY,
        {"disruptionMode": {"all": {}}, "replicatedJobs": [{"targetReplicatedJobs": [c.NODE]}]},
        ["spec.scheduling: disruptionMode and replicatedJobs are mutually exclusive"],
    ),
    "a target that is no replicated job is refused, listing those there are": AdmitCase(
        NODE_ONLY,
        {"replicatedJobs": [{"targetReplicatedJobs": [c.NODE, "nodes"]}]},
        [
            "spec.scheduling.replicatedJobs[0].targetReplicatedJobs: 'nodes' names no replicated job of the template (node)"
        ],
    ),
    "a replicated job in two entries is refused": AdmitCase(
        NODE_ONLY,
        {"replicatedJobs": [{"targetReplicatedJobs": [c.NODE]}, {"targetReplicatedJobs": [c.NODE]}]},
        [
            "spec.scheduling.replicatedJobs[1].targetReplicatedJobs: 'node' is already in spec.scheduling.replicatedJobs[0]"
        ],
    ),
    "every replicated job must be in some entry": AdmitCase(
        TORCH,
        {"replicatedJobs": [{"targetReplicatedJobs": [c.NODE]}]},
        ["must name every replicated job of the template once; missing: dataset-initializer, model-initializer"],
    ),
    "one gang of jobs that wait for each other would deadlock: refused": AdmitCase(
        SEQUENCED,
        {
            "replicatedJobs": [
                {"targetReplicatedJobs": [c.DATASET_INITIALIZER, c.NODE]},
                {"targetReplicatedJobs": [c.MODEL_INITIALIZER]},
            ]
        },
        ["node waits for dataset-initializer (dependsOn), so one gang of them would never fill"],
    ),
    "jobs that wait for each other may share a basic group": AdmitCase(
        SEQUENCED,
        {
            "replicatedJobs": [
                {"targetReplicatedJobs": [c.DATASET_INITIALIZER, c.NODE], "schedulingPolicy": {"basic": {}}},
                {"targetReplicatedJobs": [c.MODEL_INITIALIZER]},
            ]
        },
    ),
    "a pod template that names a PodGroup itself is refused": AdmitCase(
        NODE_ONLY.job(c.NODE, "template.spec.template.spec.schedulingGroup", {"podGroupName": "mine"}),
        {},
        ["replicatedJobs[node].template.spec.template.spec.schedulingGroup: must not be set with spec.scheduling"],
    ),
    "more than 8 groups are refused": AdmitCase(
        NODE_ONLY.jobs(
            [
                replicated_job(
                    f"j{i}",
                    None,
                    [container("c")],
                    dependsOn=[{"name": f"j{i - 1}", "status": "Complete"}] if i else None,
                )
                for i in range(9)
            ]
        ),
        {},
        ["spec.scheduling: resolves to 9 pod groups; a Workload holds at most 8"],
    ),
    "numNodes cannot change while gang-scheduled, suspended or not": AdmitCase(
        TORCH,
        {},
        ["spec.trainer.numNodes: Forbidden: cannot be changed while the TrainJob is gang-scheduled"],
        old=JOB.suspend(),
        new=JOB.suspend().trainer(numNodes=5),
    ),
    "numNodes may change when every group is basic": AdmitCase(
        NODE_ONLY, {"schedulingPolicy": {"basic": {}}}, old=JOB.suspend(), new=JOB.suspend().trainer(numNodes=5)
    ),
}


@pytest.mark.parametrize("case", ADMIT.values(), ids=ADMIT.keys())
def test_admission(case: AdmitCase) -> None:
    runtime = case.runtime if case.scheduling is None else case.runtime.set("spec.scheduling", case.scheduling)
    old = case.old.obj() if case.old is not None else None
    found = [str(e) for e in case.framework.validate(old, case.new.obj(), runtime.source(), NOTHING).errors]
    assert len(found) == len(case.messages), found
    for message, error in zip(case.messages, found, strict=True):
        assert message in error, error


@pytest.mark.parametrize(
    ("served", "said"),
    [
        (None, True),  # Kubernetes before 1.37, or GenericWorkload off: the group/version is not served
        (frozenset({"workloads"}), True),
        (frozenset({"workloads", "podgroups", "workloads/status", "podgroups/status"}), False),
    ],
)
def test_start_up_says_once_when_the_api_is_missing(served: frozenset[str] | None, said: bool) -> None:
    line = api_missing(served)
    assert (line is not None) == said
    if line is not None:
        assert GATE in line and "scheduling.k8s.io/v1beta1" in line and "GenericWorkload=true" in line
