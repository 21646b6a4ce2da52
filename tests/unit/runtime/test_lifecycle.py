"""Issue 13, the pure decisions: run policy precedence, stuck pods, the restart budget of a re-created JobSet,
resize while suspended (CRD rule mirror, webhook, JobSet rebuild), the runtime's run policy rule."""

from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import RuntimeBuilder, TrainJobBuilder
from trainjob_operator.api import constants as c
from trainjob_operator.api.runtime import RunPolicy
from trainjob_operator.controller.store import ObjectCache
from trainjob_operator.runtime import lifecycle
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.validation import admit_runtime, admit_trainjob, check_trainjob

FRAMEWORK = Framework.from_registry()
TJ = TrainJobBuilder.make()
RT = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={})


# --- run policy precedence ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "runtime", "want"),
    [
        pytest.param(TJ, None, RunPolicy(), id="nothing set anywhere: no timers"),
        pytest.param(
            TJ,
            RunPolicy(active_deadline_seconds=10, ttl_seconds_after_finished=20, startup_deadline_seconds=30),
            RunPolicy(active_deadline_seconds=10, ttl_seconds_after_finished=20, startup_deadline_seconds=30),
            id="the runtime's runPolicy supplies every default",
        ),
        pytest.param(
            TJ.set("spec.activeDeadlineSeconds", 1)
            .set("spec.ttlSecondsAfterFinished", 2)
            .set("spec.startupDeadlineSeconds", 3),
            RunPolicy(active_deadline_seconds=10, ttl_seconds_after_finished=20, startup_deadline_seconds=30),
            RunPolicy(active_deadline_seconds=1, ttl_seconds_after_finished=2, startup_deadline_seconds=3),
            id="the TrainJob's fields override the runtime's",
        ),
        pytest.param(
            TJ.set("spec.ttlSecondsAfterFinished", 0),
            RunPolicy(ttl_seconds_after_finished=600),
            RunPolicy(ttl_seconds_after_finished=0),
            id="a TrainJob TTL of 0 overrides (it is not 'unset')",
        ),
        pytest.param(
            TJ.set("spec.ttlSecondsAfterFinished", 5),
            RunPolicy(active_deadline_seconds=10),
            RunPolicy(active_deadline_seconds=10, ttl_seconds_after_finished=5),
            id="fields are merged one by one",
        ),
    ],
)
def test_effective_run_policy(job: TrainJobBuilder, runtime: RunPolicy | None, want: RunPolicy) -> None:
    assert lifecycle.effective_run_policy(job.obj(), runtime) == want


# --- pods that cannot start -----------------------------------------------------------------------------------------


def pod(
    name: str,
    phase: str = "Pending",
    conditions: list[dict[str, Any]] | None = None,
    waiting: str | None = None,
    init_waiting: str | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if conditions is not None:
        status["conditions"] = conditions
    if waiting is not None:
        status["containerStatuses"] = [
            {"name": "node", "state": {"waiting": {"reason": waiting, "message": f"{waiting} details"}}}
        ]
    if init_waiting is not None:
        status["initContainerStatuses"] = [{"name": "init", "state": {"waiting": {"reason": init_waiting}}}]
    return {"metadata": {"name": name}, "status": status}


UNSCHEDULABLE = [
    {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    }
]


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        pytest.param([], lifecycle.StartupCheck(), id="no pods yet: neither stuck nor started"),
        pytest.param(
            [pod("j-node-0-0", "Running"), pod("j-node-0-1", "Succeeded")],
            lifecycle.StartupCheck(started=True),
            id="every pod past Pending: started",
        ),
        pytest.param(
            [pod("j-node-0-0", "Running"), pod("j-node-0-1")],
            lifecycle.StartupCheck(),
            id="a pod still Pending for no known reason: wait",
        ),
        pytest.param(
            [pod("j-node-0-1", conditions=UNSCHEDULABLE)],
            lifecycle.StartupCheck(
                stuck=lifecycle.StuckPod(
                    "j-node-0-1", "Unschedulable", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
                )
            ),
            id="an unschedulable pod is stuck, with the scheduler's message",
        ),
        pytest.param(
            [pod("j-node-0-0", waiting="ImagePullBackOff")],
            lifecycle.StartupCheck(
                stuck=lifecycle.StuckPod("j-node-0-0", "ImagePullBackOff", "container node: ImagePullBackOff details")
            ),
            id="an image that cannot be pulled is stuck, naming the container",
        ),
        pytest.param(
            [pod("j-node-0-0", init_waiting="ErrImagePull")],
            lifecycle.StartupCheck(stuck=lifecycle.StuckPod("j-node-0-0", "ErrImagePull", "container init")),
            id="init containers count too",
        ),
        pytest.param(
            [pod("j-node-0-0", waiting="ContainerCreating")],
            lifecycle.StartupCheck(),
            id="a container still being created is not stuck",
        ),
        pytest.param(
            [pod("j-node-0-0", "Running", waiting="ImagePullBackOff")],
            lifecycle.StartupCheck(started=True),
            id="a running pod is not stuck (a restart pulling again is not a startup problem)",
        ),
        pytest.param(
            [pod("b", waiting="InvalidImageName"), pod("a", conditions=UNSCHEDULABLE)],
            lifecycle.StartupCheck(stuck=lifecycle.StuckPod("a", "Unschedulable", UNSCHEDULABLE[0]["message"])),
            id="the first stuck pod by name is reported (stable)",
        ),
    ],
)
def test_check_startup(pods: list[dict[str, Any]], want: lifecycle.StartupCheck) -> None:
    assert lifecycle.check_startup(pods) == want


def test_stuck_pod_message_names_the_pod_the_reason_and_the_deadline() -> None:
    stuck = lifecycle.StuckPod("j-node-0-1", "Unschedulable", "0/3 nodes are available")
    assert stuck.describe(300) == (
        "pod j-node-0-1 did not start within the startup deadline of 300s (Unschedulable: 0/3 nodes are available)"
    )


# --- restarts ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_restarts", "spent", "want"),
    [
        pytest.param(None, 3, None, id="no maxRestarts in the runtime: nothing to reduce"),
        pytest.param(5, 0, 5, id="a first JobSet gets the whole budget"),
        pytest.param(5, 3, 2, id="a re-created JobSet gets what is left"),
        pytest.param(5, 7, 0, id="an exhausted budget stays exhausted (never negative)"),
    ],
)
def test_remaining_restarts(max_restarts: int | None, spent: int, want: int | None) -> None:
    assert lifecycle.remaining_restarts(max_restarts, spent) == want


def jobset_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == c.JOBSET_KIND)


RT_RESTARTS = RT.set("spec.template.spec.failurePolicy", {"maxRestarts": 5})


@dataclass(frozen=True)
class BudgetCase:
    job: TrainJobBuilder
    observed: dict[str, Any] | None
    want_max_restarts: int
    want_annotations: dict[str, str] | None


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(BudgetCase(TJ, None, 5, None), id="a new TrainJob's JobSet: full budget, no annotation"),
        pytest.param(
            BudgetCase(TJ.set("status", {"restarts": 3}), None, 2, {c.RESTARTS_BEFORE_ANNOTATION: "3"}),
            id="a JobSet re-created after 3 restarts: 2 left, the 3 recorded on it",
        ),
        pytest.param(
            BudgetCase(
                TJ.suspend().set("status", {"restarts": 4}),
                {"metadata": {"annotations": {c.RESTARTS_BEFORE_ANNOTATION: "3"}}, "spec": {"suspend": True}},
                2,
                {c.RESTARTS_BEFORE_ANNOTATION: "3"},
            ),
            id="re-applying an existing JobSet keeps what it was created with (failurePolicy is immutable)",
        ),
        pytest.param(
            BudgetCase(TJ.set("status", {"restarts": 9}), None, 0, {c.RESTARTS_BEFORE_ANNOTATION: "9"}),
            id="deleting a JobSet never grants a fresh budget",
        ),
    ],
)
def test_recreated_jobset_gets_the_remaining_budget(case: BudgetCase) -> None:
    objects = FRAMEWORK.desired_objects(case.job.obj(), RT_RESTARTS.source(), Observed(jobset=case.observed))
    built = jobset_of(objects)
    assert built["spec"]["failurePolicy"]["maxRestarts"] == case.want_max_restarts
    assert built["metadata"].get("annotations") == case.want_annotations


# --- resize while suspended -------------------------------------------------------------------------------------------

RESOURCES = {"limits": {"cpu": "2"}}


@dataclass(frozen=True)
class ResizeCase:
    old: TrainJobBuilder
    new: TrainJobBuilder
    want: list[str] = field(default_factory=list)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            ResizeCase(TJ.suspend().trainer(numNodes=2), TJ.suspend().trainer(numNodes=4)),
            id="numNodes may change while suspended",
        ),
        pytest.param(
            ResizeCase(TJ.suspend().trainer(numNodes=2), TJ.trainer(numNodes=4)),
            id="numNodes may change in the update that resumes",
        ),
        pytest.param(
            ResizeCase(TJ.suspend().trainer(numNodes=2), TJ.suspend().trainer(numNodes=2, resourcesPerNode=RESOURCES)),
            id="resourcesPerNode may be added while suspended",
        ),
        pytest.param(
            ResizeCase(
                TJ.trainer(numNodes=2), TJ.trainer(numNodes=4), ["spec.trainer: Invalid value: field is immutable"]
            ),
            id="a running TrainJob stays immutable, with upstream's message",
        ),
        pytest.param(
            ResizeCase(
                TJ.trainer(numNodes=2),
                TJ.suspend().trainer(numNodes=4),
                ["spec.trainer: Invalid value: field is immutable"],
            ),
            id="suspending and resizing in one update is refused (it was running)",
        ),
        pytest.param(
            ResizeCase(
                TJ.suspend().trainer(numNodes=2, image="a"),
                TJ.suspend().trainer(numNodes=4, image="b"),
                ["spec.trainer: Invalid value: field is immutable"],
            ),
            id="other trainer fields stay immutable while suspended",
        ),
        pytest.param(
            ResizeCase(
                TJ.suspend().trainer(numNodes=2),
                TJ.suspend().trainer(numNodes=2, image="b"),
                ["spec.trainer: Invalid value: field is immutable"],
            ),
            id="adding the image while suspended is refused",
        ),
        pytest.param(
            ResizeCase(
                TJ.suspend().trainer(numNodes=2),
                TJ.suspend().trainer(numNodes=2, numProcPerNode=2),
                ["spec.trainer: Invalid value: field is immutable"],
            ),
            id="numProcPerNode stays immutable while suspended",
        ),
    ],
)
def test_resize_transition_rule(case: ResizeCase) -> None:
    _, validation = check_trainjob(case.new.raw(), case.old.raw())
    assert [str(e) for e in validation.errors] == case.want


ACTIVE = {
    "spec": {"suspend": True},
    "status": {
        "replicatedJobsStatus": [{"name": "node", "active": 2, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 0}]
    },
}


@pytest.mark.parametrize(
    ("jobset", "want"),
    [
        pytest.param(None, [], id="no JobSet yet: admitted"),
        pytest.param(
            {
                "spec": {"suspend": True},
                "status": {
                    "replicatedJobsStatus": [
                        {"name": "node", "active": 0, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 1}
                    ]
                },
            },
            [],
            id="a suspended JobSet with no active pods: admitted",
        ),
        pytest.param(
            ACTIVE,
            [
                "spec.trainer.numNodes: Forbidden: cannot be changed while the JobSet's ReplicatedJob "
                "node is still active"
            ],
            id="pods of the suspended JobSet still running: refused",
        ),
    ],
)
def test_resize_webhook_waits_for_the_pods(jobset: dict[str, Any] | None, want: list[str]) -> None:
    old, new = TJ.suspend().trainer(numNodes=2).obj(), TJ.suspend().trainer(numNodes=3).obj()
    result = admit_trainjob(FRAMEWORK, old, new, lambda *_: RT.source(), Observed(jobset=jobset))
    assert [str(e) for e in result.errors] == want


def built(job: TrainJobBuilder, jobset: dict[str, Any] | None = None) -> dict[str, Any]:
    return jobset_of(FRAMEWORK.desired_objects(job.obj(), RT.source(), Observed(jobset=jobset)))


def cached(jobset: dict[str, Any]) -> dict[str, Any]:
    """The JobSet as the operator's cache keeps it (the sizes only)."""
    cache = ObjectCache(keep_spec=("suspend", "volumeClaimPolicies", "replicatedJobs"))
    cache.put({**jobset, "status": {"restarts": 0}})
    got = cache.get((jobset["metadata"]["namespace"], jobset["metadata"]["name"]))
    assert got is not None
    return got


@pytest.mark.parametrize(
    ("before", "after", "want"),
    [
        pytest.param(
            TJ.suspend().trainer(numNodes=2),
            TJ.suspend().trainer(numNodes=2),
            False,
            id="same size: re-applied, not rebuilt",
        ),
        pytest.param(TJ.suspend().trainer(numNodes=2), TJ.trainer(numNodes=2), False, id="a plain resume: not rebuilt"),
        pytest.param(TJ.suspend().trainer(numNodes=2), TJ.trainer(numNodes=4), True, id="more nodes: rebuilt"),
        pytest.param(
            TJ.suspend().trainer(numNodes=2),
            TJ.suspend().trainer(numNodes=2, resourcesPerNode=RESOURCES),
            True,
            id="other resources: rebuilt",
        ),
        pytest.param(
            TJ.suspend().trainer(numNodes=2),
            TJ.suspend()
            .trainer(numNodes=2)
            .patch(
                "kueue.x-k8s.io/manager",
                [{"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"zone": "a"}}}}}}],
            ),
            False,
            id="Kueue's runtime patch (nodeSelector) is no resize",
        ),
    ],
)
def test_needs_rebuild(before: TrainJobBuilder, after: TrainJobBuilder, want: bool) -> None:
    observed = cached(built(before))
    assert lifecycle.needs_rebuild(built(after, observed), observed) is want


def test_a_rebuilt_jobset_follows_the_new_size() -> None:
    jobset = built(TJ.trainer(numNodes=4))
    node = next(rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == c.NODE)
    assert (node["template"]["spec"]["parallelism"], node["template"]["spec"]["completions"]) == (4, 4)
    env = {e["name"]: e.get("value") for e in node["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PET_NNODES"] == "4"


# --- the runtime's run policy -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runtime", "want"),
    [
        pytest.param(RT.set("spec.runPolicy", {"ttlSecondsAfterFinished": 60}), [], id="a runPolicy alone is fine"),
        pytest.param(
            RT.set("spec.template.spec.ttlSecondsAfterFinished", 60),
            [],
            id="a JobSet TTL without a runPolicy is left alone (v2.3 runtimes keep working)",
        ),
        pytest.param(
            RT.set("spec.runPolicy", {"activeDeadlineSeconds": 60}).set(
                "spec.template.spec.ttlSecondsAfterFinished", 60
            ),
            [
                "spec.template.spec.ttlSecondsAfterFinished: Invalid value: 60: must not be set when "
                "spec.runPolicy is set: use spec.runPolicy.ttlSecondsAfterFinished, which deletes the TrainJob "
                "with its JobSet"
            ],
            id="a runPolicy with a JobSet TTL is refused, naming the field",
        ),
    ],
)
def test_runtime_run_policy_rule(runtime: RuntimeBuilder, want: list[str]) -> None:
    assert [str(e) for e in admit_runtime(runtime.obj()).errors] == want


@pytest.mark.parametrize(
    ("field_path", "value", "want"),
    [
        (
            "spec.ttlSecondsAfterFinished",
            -1,
            "spec.ttlSecondsAfterFinished: Invalid value: -1: "
            "spec.ttlSecondsAfterFinished in body should be greater than or equal to 0",
        ),
        (
            "spec.startupDeadlineSeconds",
            0,
            "spec.startupDeadlineSeconds: Invalid value: 0: "
            "spec.startupDeadlineSeconds in body should be greater than or equal to 1",
        ),
    ],
)
def test_trainjob_lifecycle_field_ranges(field_path: str, value: int, want: str) -> None:
    _, validation = check_trainjob(TJ.set(field_path, value).raw())
    assert [str(e) for e in validation.errors] == [want]


def test_ttl_is_mutable_and_the_startup_deadline_is_not() -> None:
    old = TJ.set("spec.ttlSecondsAfterFinished", 60).set("spec.startupDeadlineSeconds", 60)
    assert check_trainjob(old.set("spec.ttlSecondsAfterFinished", 5).raw(), old.raw())[1].errors == ()
    _, validation = check_trainjob(old.set("spec.startupDeadlineSeconds", 5).raw(), old.raw())
    assert [str(e) for e in validation.errors] == ["spec.startupDeadlineSeconds: Invalid value: 5: field is immutable"]


# --- offline render and validate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CliCase:
    args: list[str]
    """`validate`/`render` and flags; `{tj}`, `{old}`, `{rt}` stand for the written files."""
    new: TrainJobBuilder
    old: TrainJobBuilder | None
    runtime: RuntimeBuilder
    code: int
    err: str


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            CliCase(
                ["validate", "-f", "{tj}", "-r", "{rt}", "--old", "{old}"],
                TJ.suspend().trainer(numNodes=4),
                TJ.suspend().trainer(numNodes=2),
                RT,
                0,
                "valid: 1 TrainJob(s), 1 runtime(s)\n",
            ),
            id="validate --old: a resize of a suspended TrainJob is valid",
        ),
        pytest.param(
            CliCase(
                ["validate", "-f", "{tj}", "-r", "{rt}", "--old", "{old}"],
                TJ.trainer(numNodes=4),
                TJ.trainer(numNodes=2),
                RT,
                1,
                "spec.trainer: Invalid value: field is immutable\n"
                "invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
            ),
            id="validate --old: a resize of a running TrainJob is refused with the CRD's message",
        ),
        pytest.param(
            CliCase(
                ["validate", "-f", "{tj}", "-r", "{rt}"],
                TJ.set("spec.ttlSecondsAfterFinished", 60),
                None,
                RT.set("spec.runPolicy", {"activeDeadlineSeconds": 3600, "ttlSecondsAfterFinished": 600}),
                0,
                "run policy of TrainJob default/test-job: activeDeadlineSeconds=3600, "
                "ttlSecondsAfterFinished=60\nvalid: 1 TrainJob(s), 1 runtime(s)\n",
            ),
            id="validate prints the effective run policy (the TrainJob's TTL over the runtime's)",
        ),
        pytest.param(
            CliCase(
                ["validate", "-f", "{tj}", "-r", "{rt}"],
                TJ.set("spec.startupDeadlineSeconds", 0),
                None,
                RT,
                1,
                "spec.startupDeadlineSeconds: Invalid value: 0: spec.startupDeadlineSeconds in body "
                "should be greater than or equal to 1\n"
                "invalid: TrainJob default/test-job ({tj}#1): 1 error(s)\n",
            ),
            id="validate refuses a startup deadline below 1s",
        ),
        pytest.param(
            CliCase(
                ["validate", "-f", "{tj}", "-r", "{rt}"],
                TJ,
                None,
                RT.set("spec.runPolicy", {"ttlSecondsAfterFinished": 1}).set(
                    "spec.template.spec.ttlSecondsAfterFinished", 5
                ),
                1,
                "spec.template.spec.ttlSecondsAfterFinished: Invalid value: 5: must not be set when "
                "spec.runPolicy is set: use spec.runPolicy.ttlSecondsAfterFinished, which deletes the "
                "TrainJob with its JobSet\ninvalid: TrainingRuntime default/test-runtime ({rt}#1): "
                "1 error(s)\n",
            ),
            id="validate refuses a runtime with a runPolicy and a JobSet TTL",
        ),
    ],
)
def test_cli(case: CliCase, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from trainjob_operator.cli import main

    files = {"tj": case.new.raw(), "rt": case.runtime.raw(), "old": case.old.raw() if case.old else None}
    paths = {}
    for name, doc in files.items():
        if doc is not None:
            paths[name] = str(tmp_path / f"{name}.yaml")
            (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    code = main([a.format(**paths) for a in case.args])
    assert (code, capsys.readouterr().err) == (case.code, case.err.format(**paths))


def test_render_gives_a_recreated_jobset_the_remaining_budget(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from trainjob_operator.cli import main

    (tmp_path / "tj.yaml").write_text(yaml.safe_dump(TJ.set("status", {"restarts": 2}).raw()))
    (tmp_path / "rt.yaml").write_text(yaml.safe_dump(RT_RESTARTS.raw()))
    assert main(["render", "-f", str(tmp_path / "tj.yaml"), "-r", str(tmp_path / "rt.yaml")]) == 0
    rendered = jobset_of(list(yaml.safe_load_all(capsys.readouterr().out)))
    assert (rendered["metadata"]["annotations"], rendered["spec"]["failurePolicy"]["maxRestarts"]) == (
        {c.RESTARTS_BEFORE_ANNOTATION: "2"},
        3,
    )


# --- fields older clients drop (Kueue v0.19 PUTs TrainJobs with Trainer v2.2.1 types) ---------------------------


@pytest.mark.parametrize(
    ("new", "old", "full_update", "want"),
    [
        pytest.param(
            {"spec": {"suspend": False}},
            {"spec": {"suspend": True, "ttlSecondsAfterFinished": 60}},
            True,
            [{"op": "add", "path": "/spec/ttlSecondsAfterFinished", "value": 60}],
            id="a PUT that leaves the TTL out (Kueue's admission) keeps it",
        ),
        pytest.param(
            {"spec": {}},
            {"spec": {"startupDeadlineSeconds": 30, "ttlSecondsAfterFinished": 0}},
            True,
            [
                {"op": "add", "path": "/spec/ttlSecondsAfterFinished", "value": 0},
                {"op": "add", "path": "/spec/startupDeadlineSeconds", "value": 30},
            ],
            id="both newer fields, a zero TTL included",
        ),
        pytest.param(
            {"spec": {}},
            {"spec": {"ttlSecondsAfterFinished": 60}},
            False,
            [],
            id="a patch that removes the TTL removes it",
        ),
        pytest.param(
            {"spec": {"ttlSecondsAfterFinished": 5}},
            {"spec": {"ttlSecondsAfterFinished": 60}},
            True,
            [],
            id="a PUT that changes the TTL changes it",
        ),
        pytest.param({"spec": {}}, None, True, [], id="a create has nothing to keep"),
    ],
)
def test_keep_newer_fields(
    new: dict[str, Any], old: dict[str, Any] | None, full_update: bool, want: list[dict[str, Any]]
) -> None:
    from trainjob_operator.runtime.defaulting import keep_newer_fields

    assert keep_newer_fields(new, old, full_update) == want
