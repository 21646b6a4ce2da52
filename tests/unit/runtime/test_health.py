"""Issue 27: STATE, its reason, RESTARTS and the pod Warning Events as a pure function of the TrainJob, its JobSet
and its pods (runtime/health.py), table-driven with whole-status comparisons."""

from dataclasses import dataclass, field
from typing import Any

import pytest

from builders import PodBuilder, RuntimeBuilder, TrainJobBuilder
from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import TrainJobStatus
from trainjob_operator.runtime import health
from trainjob_operator.runtime.health import PodWarning
from trainjob_operator.runtime.observed import Observed
from trainjob_operator.runtime.pipeline import Framework

JOB = TrainJobBuilder.make()
POD = PodBuilder.make()
SECOND = PodBuilder.make(index=1, suffix="fghij")
GPU_MESSAGE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
FAILED_CONDITION = {
    "type": "Failed",
    "status": "True",
    "reason": "FailedJobs",
    "message": "jobset failed due to one or more job failures",
    "lastTransitionTime": "2026-11-22T11:30:00Z",
}
RUNNING_JOBS = [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}]


def jobset(restarts: int = 0, uid: str = "jobset-uid") -> dict[str, Any]:
    return {"metadata": {"name": "test-job", "uid": uid}, "status": {"restarts": restarts}}


def pods(*builders: PodBuilder) -> list[dict[str, Any]]:
    return [b.raw() for b in builders]


def failed_warning(pod: str, code: int = 1, restarts: int = 0, reason: str = "Error") -> PodWarning:
    again = f", restarted {restarts} time{'s' if restarts != 1 else ''}" if restarts else ""
    return PodWarning(
        "PodFailed",
        f"pod {pod}: container node exited with code {code} ({reason}){again}",
        f"failed/node/node/{code}",
    )


@dataclass(frozen=True)
class Case:
    pods: list[dict[str, Any]] | None
    want: dict[str, Any]
    warnings: tuple[PodWarning, ...] = ()
    status: dict[str, Any] = field(default_factory=dict)
    jobset: dict[str, Any] | None = field(default_factory=jobset)
    job: TrainJobBuilder = JOB


CASES = [
    pytest.param(
        Case(
            None, {"state": "Running", "jobsStatus": RUNNING_JOBS, "restarts": 0}, status={"jobsStatus": RUNNING_JOBS}
        ),
        id="pods unknown (no pod watch): an active Job means Running, as before",
    ),
    pytest.param(
        Case(pods(POD.running(), SECOND.running()), {"state": "Running", "restarts": 0}),
        id="every pod running: Running, nothing to explain, no restart",
    ),
    pytest.param(
        Case([], {"state": "Pending", "restarts": 0}),
        id="a JobSet without pods yet: Pending",
    ),
    pytest.param(
        Case(
            pods(POD.unschedulable(GPU_MESSAGE), SECOND.running()),
            {
                "state": "Pending",
                "reason": "Unschedulable",
                "message": f"pod {POD.raw()['metadata']['name']}: {GPU_MESSAGE}",
                "restarts": 0,
                "jobsStatus": RUNNING_JOBS,
            },
            (
                PodWarning(
                    "PodUnschedulable",
                    f"pod {POD.raw()['metadata']['name']} cannot be scheduled: {GPU_MESSAGE}",
                    "unschedulable/node",
                ),
            ),
            status={"jobsStatus": RUNNING_JOBS},
        ),
        id="an unschedulable pod: Pending with the scheduler's message, though the Job is active",
    ),
    pytest.param(
        Case(
            pods(POD.image_pull_failing()),
            {
                "state": "Pending",
                "reason": "ImagePullBackOff",
                "message": f'pod {POD.raw()["metadata"]["name"]}: container node: Back-off pulling image "nope"',
                "restarts": 0,
            },
            (
                PodWarning(
                    "PodCannotStart",
                    f"pod {POD.raw()['metadata']['name']} cannot start (ImagePullBackOff): container node: "
                    'Back-off pulling image "nope"',
                    "cannot-start/node/ImagePullBackOff",
                ),
            ),
        ),
        id="an image that cannot be pulled: Pending with the kubelet's reason",
    ),
    pytest.param(
        Case(
            pods(POD.crash_looping(restarts=4, exit_code=2), SECOND.running()),
            {
                "state": "Restarting",
                "reason": "CrashLoopBackOff",
                "message": f"pod {POD.raw()['metadata']['name']}: container node exited with code 2 "
                "(CrashLoopBackOff), restarted 4 times",
                "restarts": 4,
                "restartCounts": {"jobSet": 0, "pods": 4, "podsBeforeAttempt": 0, "attempt": "jobset-uid/0/"},
            },
            (failed_warning(POD.raw()["metadata"]["name"], 2, 4, "CrashLoopBackOff"),),
        ),
        id="a container in back-off: Restarting, RESTARTS counts its restarts at once, one warning",
    ),
    pytest.param(
        Case(
            pods(POD.running(restarts=1, last_exit=137)),
            {
                "state": "Running",
                "restarts": 1,
                "restartCounts": {"jobSet": 0, "pods": 1, "podsBeforeAttempt": 0, "attempt": "jobset-uid/0/"},
            },
            (failed_warning(POD.raw()["metadata"]["name"], 137, 1),),
        ),
        id="a container running again after a failure: Running, the restart counted and warned about",
    ),
    pytest.param(
        Case(
            pods(POD.failed(3)),
            {
                "state": "Restarting",
                "reason": "PodFailed",
                "message": f"pod {POD.raw()['metadata']['name']}: container node exited with code 3 (Error)",
                "restarts": 0,
            },
            (failed_warning(POD.raw()["metadata"]["name"], 3),),
        ),
        id="a failed pod not replaced yet: Restarting, naming the pod and the exit code; RESTARTS counts the "
        "restart when it happens (a JobSet restart counts a Job's last failure once)",
    ),
    pytest.param(
        Case(
            pods(
                POD.failed(3),
                PodBuilder.make(suffix="zzzzz", created="2026-11-22T11:01:00Z"),
            ),
            {
                "state": "Restarting",
                "reason": "PodFailed",
                "message": f"pod {POD.raw()['metadata']['name']}: container node exited with code 3 (Error)",
                "restarts": 1,
                "restartCounts": {"jobSet": 0, "pods": 1, "podsBeforeAttempt": 0, "attempt": "jobset-uid/0/"},
            },
            (failed_warning(POD.raw()["metadata"]["name"], 3),),
        ),
        id="a failed pod whose replacement is still pending: Restarting, one restart",
    ),
    pytest.param(
        Case(
            pods(
                POD.failed(3),
                PodBuilder.make(suffix="aaaaa", created="2026-11-22T11:01:00Z").running(),
                PodBuilder.make(suffix="bbbbb", created="2026-11-21T11:01:00Z").failed(3),
            ),
            {
                "state": "Running",
                "restarts": 2,
                "restartCounts": {"jobSet": 0, "pods": 2, "podsBeforeAttempt": 0, "attempt": "jobset-uid/0/"},
            },
            (failed_warning("test-job-node-0-0-abcde", 3),),
        ),
        id="failed pods replaced by a running one: Running, two restarts, one warning for failures alike",
    ),
    pytest.param(
        Case(
            pods(POD.crash_looping(5), PodBuilder.make(attempt=1, suffix="new00").running()),
            {"state": "Running", "restarts": 1},
            status={"restarts": 1},
            jobset=jobset(restarts=1),
        ),
        id="pods of an earlier JobSet attempt are not looked at",
    ),
    pytest.param(
        Case(
            pods(
                POD.crash_looping(5).set(
                    "metadata.labels", {c.JOBSET_NAME_LABEL: "test-job", c.JOBSET_UID_LABEL: "old"}
                )
            ),
            {"state": "Pending", "restarts": 0},
        ),
        id="pods of another JobSet of the same name (another uid) are not looked at",
    ),
    pytest.param(
        Case(
            pods(PodBuilder.make(attempt=1).running(restarts=2, last_exit=1)),
            {
                "state": "Running",
                "restarts": 11,
                "restartCounts": {"jobSet": 1, "pods": 10, "podsBeforeAttempt": 8, "attempt": "jobset-uid/1/"},
            },
            (failed_warning("test-job-node-0-0-abcde", 1, 2),),
            status={
                "restarts": 8,
                "restartCounts": {"jobSet": 0, "pods": 8, "podsBeforeAttempt": 1, "attempt": "jobset-uid/0/"},
            },
            jobset=jobset(restarts=1),
        ),
        id="a JobSet restart: the failures of the gone pods stay counted, the new pods' are added",
    ),
    pytest.param(
        Case(
            pods(POD.running(restarts=1, last_exit=1)),
            {
                "state": "Running",
                "restarts": 6,
                "restartCounts": {"jobSet": 0, "pods": 6, "podsBeforeAttempt": 0, "attempt": "jobset-uid/0/"},
            },
            (failed_warning("test-job-node-0-0-abcde", 1, 1),),
            status={
                "restarts": 6,
                "restartCounts": {"jobSet": 0, "pods": 6, "podsBeforeAttempt": 0, "attempt": "jobset-uid/0/"},
            },
        ),
        id="fewer failures seen than counted before (a pod gone meanwhile): RESTARTS never goes down",
    ),
    pytest.param(
        Case(
            pods(POD.failed(3)),
            {
                "state": "Failed",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
                "conditions": [FAILED_CONDITION],
                "restarts": 0,
            },
            (failed_warning(POD.raw()["metadata"]["name"], 3),),
            status={"conditions": [FAILED_CONDITION]},
        ),
        id="failing in this pass: Failed with its condition's reason, and a warning for the pod that failed it",
    ),
    pytest.param(
        Case(
            pods(POD.crash_looping(3)),
            {
                "state": "Failed",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
                "conditions": [FAILED_CONDITION],
                "restarts": 3,
                "restartCounts": {"jobSet": 0, "pods": 3, "podsBeforeAttempt": 0, "attempt": "jobset-uid/0/"},
            },
            status={"conditions": [FAILED_CONDITION]},
            job=JOB.set("status", {"state": "Failed", "conditions": [FAILED_CONDITION]}),
        ),
        id="Failed before: Failed whatever its pods do, warns about nothing more, and counts what they did",
    ),
    pytest.param(
        Case(
            pods(POD.unschedulable()),
            {"state": "Suspended", "restarts": 0},
            job=JOB.suspend(),
        ),
        id="a suspended TrainJob is Suspended",
    ),
    pytest.param(
        Case(
            pods(POD.succeeded(), SECOND.running()),
            {"state": "Running", "restarts": 0},
        ),
        id="a pod done and one running: Running",
    ),
    pytest.param(
        Case(pods(POD.succeeded(), SECOND.succeeded()), {"state": "Running", "restarts": 0}),
        id="every pod done, the JobSet not Completed yet: still Running",
    ),
    pytest.param(
        Case(pods(POD.succeeded(), SECOND), {"state": "Pending", "restarts": 0}),
        id="an initializer done, the trainer's pod not started: Pending",
    ),
    pytest.param(
        Case(None, {"restarts": 2, "state": "Pending"}, status={"restarts": 2}, jobset=None),
        id="an older operator's restarts (JobSet restarts only) are kept as they were",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_health(case: Case) -> None:
    status = TrainJobStatus.model_validate(case.status)
    got = health.apply_health(case.job.obj(), status, case.jobset, case.pods)
    assert status.to_wire() == case.want
    assert got.warnings == case.warnings


def test_a_crash_loop_warns_once_per_kind_of_failure_and_the_event_is_named_after_it() -> None:
    job = JOB.obj()
    first = health.assess(job, TrainJobStatus(), jobset(), pods(POD.crash_looping(1)))
    later = health.assess(job, TrainJobStatus(), jobset(), pods(POD.crash_looping(7)))
    exited = health.assess(job, TrainJobStatus(), jobset(), pods(POD.failed(1)))
    assert [w.key for w in first.warnings] == [w.key for w in later.warnings] == [w.key for w in exited.warnings]
    assert [w.key for w in first.warnings] == ["failed/node/node/1"], "seen as Error, then in back-off: one event"
    event = health.warning_event(job, first.warnings[0], "2026-11-22T12:00:00Z")
    again = health.warning_event(job, later.warnings[0], "2026-11-22T12:05:00Z")
    assert event["metadata"]["name"] == again["metadata"]["name"], "a second create conflicts: no flood"
    assert event["metadata"]["name"].startswith("test-job.")
    assert (event["type"], event["reason"], event["involvedObject"]["uid"]) == ("Warning", "PodFailed", "uid")
    other = health.warning_event(TrainJobBuilder.make(uid="other").obj(), first.warnings[0], "t")
    assert other["metadata"]["name"] != event["metadata"]["name"], "a new TrainJob of the same name warns anew"


def test_the_cached_pod_keeps_only_what_the_decisions_read() -> None:
    raw = POD.crash_looping(3).set("spec.containers.0.env", [{"name": "TOKEN", "value": "secret"}]).raw()
    raw["status"]["containerStatuses"][0]["state"]["waiting"]["message"] = "x" * 5000
    summary = health.pod_summary(raw)
    assert "spec" not in summary and "unrelated" not in summary["metadata"]["labels"]
    ended = POD.failed(1).raw()
    ended["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = "token=hunter2"
    assert "hunter2" not in str(health.pod_summary(ended)), "a termination log is the container's text: not kept"
    assert len(summary["status"]["containerStatuses"][0]["state"]["waiting"]["message"]) == health.TEXT_LIMIT
    for builder in (POD.crash_looping(3), POD.unschedulable(), POD.failed(2), POD.running(1, 137), SECOND.running()):
        whole = builder.raw()
        assert health.assess(JOB.obj(), TrainJobStatus(), jobset(), [health.pod_summary(whole)]) == health.assess(
            JOB.obj(), TrainJobStatus(), jobset(), [whole]
        ), "the summary decides as the whole pod does"


MPI_RUNTIME = RuntimeBuilder.make().jobs(
    [
        {
            "name": "launcher",
            "template": {
                "metadata": {"labels": {c.ANCESTOR_LABEL: "trainer"}},
                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "mpi"}]}}},
            },
        },
        {
            "name": "node",
            "template": {"spec": {"template": {"spec": {"containers": [{"name": "node", "image": "mpi"}]}}}},
        },
    ]
)


@pytest.mark.parametrize(
    ("runtime", "num_nodes", "want"),
    [
        pytest.param(
            MPI_RUNTIME.ml_policy(1, mpi={"runLauncherAsNode": True}), 3, 3, id="MPI, launcher as a node, numNodes 3: 3"
        ),
        pytest.param(
            MPI_RUNTIME.ml_policy(1, mpi={"runLauncherAsNode": False}), 3, 3, id="MPI, launcher apart, numNodes 3: 3"
        ),
        pytest.param(
            MPI_RUNTIME.ml_policy(2, mpi={"runLauncherAsNode": True}),
            None,
            3,
            id="MPI, only the runtime's numNodes 2: upstream runs two launchers beside a node, the hostfile's 3 hosts",
        ),
        pytest.param(RuntimeBuilder.make().ml_policy(4, torch={}), None, 4, id="torch, the runtime's numNodes: 4"),
        pytest.param(RuntimeBuilder.make().ml_policy(4, torch={}), 2, 2, id="torch, the TrainJob's numNodes: 2"),
    ],
)
def test_nodes_are_counted_as_the_trainjob_asks(runtime: RuntimeBuilder, num_nodes: int | None, want: int) -> None:
    job = JOB.trainer(numNodes=num_nodes) if num_nodes is not None else JOB
    framework = Framework.from_registry()
    info = framework.runtime_info(job.obj(), runtime.source(), Observed())
    assert health.requested_nodes(info) == want


def test_the_metrics_count_every_state_the_status_can_carry() -> None:
    from typing import get_args

    from trainjob_operator.metrics import STATES

    annotation = TrainJobStatus.model_fields["state"].annotation
    [literal, _none] = get_args(annotation)
    assert sorted(get_args(literal)) == sorted(STATES)


def test_the_status_message_is_printable_and_within_its_bound_whatever_the_pod_says() -> None:
    """status.message quotes the kubelet's and the scheduler's text, which quotes the user's (an image name):
    escaped as a condition message is (`kubectl describe` prints it raw), and still within the CRD's 1024
    characters once escaped, or the API server refuses every status write of the TrainJob."""
    evil = "img\r\x1b[2J" + "\x1b" * 400
    pod = POD.image_pull_failing().set(
        "status.containerStatuses.0.state.waiting.message", f'Back-off pulling image "{evil}"'
    )
    for given in (pod.raw(), health.pod_summary(pod.raw())):
        status = TrainJobStatus()
        health.apply_health(JOB.obj(), status, jobset(), [given])
        assert status.message is not None and status.message.startswith("pod test-job-node-0-0-abcde: ")
        assert "\x1b" not in status.message and "\r" not in status.message and "\\x1b[2J" in status.message
        assert len(status.message) <= health.MESSAGE_LIMIT
        TrainJobStatus.model_validate(status.to_wire())  # the CRD's bound, as the model declares it
        for warning in health.assess(JOB.obj(), TrainJobStatus(), jobset(), [given]).warnings:
            message = health.warning_event(JOB.obj(), warning, "t")["message"]
            assert "\x1b" not in message and len(message) <= health.MESSAGE_LIMIT, "an Event's note: 1 KiB at most"


@pytest.mark.parametrize("size", [10, 1_000])
def test_the_health_of_a_huge_trainjob_reads_each_pod_a_bounded_number_of_times(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37: a reconcile of a TrainJob of thousands of nodes reads its pods in time linear in their number (each
    pending pod's slot was compared with every pod: 6.5 s of CPU per reconcile at 5,000 pods, the operator's whole
    CPU while such a TrainJob's pods started)."""
    calls = 0
    slot = health._slot

    def counted(pod: dict[str, Any]) -> tuple[str, str]:
        nonlocal calls
        calls += 1
        return slot(pod)

    monkeypatch.setattr(health, "_slot", counted)
    some = [PodBuilder.make(index=i).raw() for i in range(size)]
    for i, pod in enumerate(some):
        pod["status"]["phase"] = "Running" if i % 2 else "Pending"
    got = health.apply_health(JOB.obj(), TrainJobStatus(), jobset(), some)
    assert got.state == c.STATE_RUNNING
    assert calls <= 6 * size, f"{calls} slot lookups for {size} pods"
