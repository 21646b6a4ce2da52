"""Identity is the uid (issue 28; runtime/identity.py and the plan): for every child kind, an object under the child's
name that another incarnation of the TrainJob (or anything else) controls is never read, adopted or patched. The
build stops (Blocked) and names it; the wait deletes only a predecessor's objects (uid precondition) and says why it
waits; the status and terminal conditions come from this TrainJob's own JobSet only. Tables keyed by sentences;
whole-object expectations."""

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pytest

from builders import FixedKeys, RuntimeBuilder, TrainJobBuilder
from trainjob_operator.api import constants as c
from trainjob_operator.api.runtime import SHIPPED_MODELS, RunPolicy
from trainjob_operator.api.trainjob import Condition, TrainJobStatus
from trainjob_operator.controller.store import ObjectCache
from trainjob_operator.runtime import plan
from trainjob_operator.runtime.identity import Stranger, owned_by, same_incarnation, stranger, wait_seconds
from trainjob_operator.runtime.observed import ObjectRef, Observed, SSHKeyPair, StatusEndpoint
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plan import Blocked, Stage
from trainjob_operator.runtime.snapshot import build_snapshot
from trainjob_operator.ui import view

FRAMEWORK = Framework.from_registry()
NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)
STAMP = "2026-11-22T12:00:00Z"
JOB = TrainJobBuilder.make()  # uid "uid"
KEY = SSHKeyPair(private_pem=b"PRIVATE", public_openssh=b"ecdsa-sha2-nistp521 AAAA\n")
SERVER = StatusEndpoint("https://127.0.0.1:10443", "CA")


def owner(uid: str, name: str = "test-job", kind: str = c.TRAINJOB_KIND) -> dict[str, Any]:
    return {"apiVersion": c.API_VERSION, "kind": kind, "name": name, "uid": uid, "controller": True}


def obj(ref: ObjectRef, *owners: dict[str, Any], uid: str = "child-uid", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "metadata": {"name": ref.name, "namespace": "default", "uid": uid, "ownerReferences": list(owners), **meta},
    }


PREDECESSOR = owner("old-uid")
"""The controller ownerReference of the TrainJob deleted before this one was created under the same name."""


# --- every child kind: a predecessor's object under the child's name stops the build ------------------------------


@dataclass(frozen=True)
class ChildCase:
    runtime: RuntimeBuilder
    job: TrainJobBuilder
    ref: ObjectRef
    status_server: StatusEndpoint | None = None


TORCH = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={})
MPI = RuntimeBuilder.make().ml_policy(
    num_nodes=2, mpi={"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
)
FLUX = RuntimeBuilder.make().ml_policy(num_nodes=2, flux={})
CONFIGMAP = ("v1", "ConfigMap")
CHILDREN = {
    "the JobSet of a previous TrainJob of this name": ChildCase(
        TORCH, JOB, ObjectRef(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job")
    ),
    "an MPI SSH Secret of a previous TrainJob of this name": ChildCase(
        MPI, JOB, ObjectRef("v1", "Secret", "test-job-mpi-ssh-auth")
    ),
    "an MPI hostfile ConfigMap of a previous TrainJob of this name": ChildCase(
        MPI, JOB, ObjectRef(*CONFIGMAP, "test-job-mpi-hostfile")
    ),
    "a scheduler-plugins PodGroup of a previous TrainJob of this name": ChildCase(
        TORCH.coscheduling(), JOB, ObjectRef(c.COSCHEDULING_API_VERSION, c.POD_GROUP_KIND, "test-job")
    ),
    "a Volcano PodGroup of a previous TrainJob of this name": ChildCase(
        TORCH.volcano(), JOB, ObjectRef(c.VOLCANO_API_VERSION, c.POD_GROUP_KIND, "test-job")
    ),
    "Flux's entrypoint ConfigMap of a previous TrainJob of this name": ChildCase(
        FLUX, JOB.trainer(numNodes=2), ObjectRef(*CONFIGMAP, "test-job-flux-entrypoint")
    ),
    "Flux's CURVE Secret of a previous TrainJob of this name": ChildCase(
        FLUX, JOB.trainer(numNodes=2), ObjectRef("v1", "Secret", "test-job-flux-curve")
    ),
    "the status server's CA ConfigMap of a previous TrainJob of this name": ChildCase(
        TORCH, JOB, ObjectRef(*CONFIGMAP, "test-job-tls-config"), SERVER
    ),
}


def placed(case: ChildCase, found: dict[str, Any]) -> Observed:
    """`found` where the shell would see it: the JobSet in the watch cache, anything else read by a probe or after a
    create that conflicted."""
    if case.ref.kind == c.JOBSET_KIND:
        return Observed(jobset=found, keys=FixedKeys(KEY), status_server=case.status_server)
    return Observed(read={case.ref: found}, keys=FixedKeys(KEY), status_server=case.status_server)


@pytest.mark.parametrize("case", CHILDREN.values(), ids=CHILDREN.keys())
def test_a_predecessors_child_stops_the_build_and_is_named(case: ChildCase) -> None:
    built = plan.children(
        FRAMEWORK,
        case.job.obj(),
        case.runtime.source(),
        Observed(keys=FixedKeys(KEY), status_server=case.status_server),
    )
    assert case.ref in {plan.ref_of(w.obj) for w in built.writes if not isinstance(w, plan.Delete)}, "a child kind"
    with pytest.raises(Blocked) as raised:
        plan.children(FRAMEWORK, case.job.obj(), case.runtime.source(), placed(case, obj(case.ref, PREDECESSOR)))
    assert raised.value.strangers == (
        Stranger(case.ref, "child-uid", "TrainJob 'test-job' (uid old-uid)", predecessor=True, deleting=False),
    )


@pytest.mark.parametrize("case", CHILDREN.values(), ids=CHILDREN.keys())
def test_an_object_no_trainjob_controls_stops_the_build_and_is_not_a_predecessor(case: ChildCase) -> None:
    with pytest.raises(Blocked) as raised:
        plan.children(FRAMEWORK, case.job.obj(), case.runtime.source(), placed(case, obj(case.ref)))
    assert raised.value.strangers == (Stranger(case.ref, "child-uid", "no controller", False, False),)


@pytest.mark.parametrize("case", CHILDREN.values(), ids=CHILDREN.keys())
def test_this_trainjobs_own_child_is_built_over(case: ChildCase) -> None:
    job = case.job.suspend().obj()
    first = plan.children(
        FRAMEWORK, job, case.runtime.source(), Observed(keys=FixedKeys(KEY), status_server=case.status_server)
    )
    [mine] = [dict(w.obj) for w in first.writes if not isinstance(w, plan.Delete) and plan.ref_of(w.obj) == case.ref]
    mine["metadata"] = {**mine["metadata"], "uid": "child-uid"}  # as the API server answers: owner "uid"
    children = plan.children(FRAMEWORK, job, case.runtime.source(), placed(case, mine))
    assert case.ref not in children.probes
    written = {plan.ref_of(w.obj) for w in children.writes if not isinstance(w, plan.Delete)}
    assert (case.ref in written) is (case.ref.kind != "Secret"), "applied again; a created-once Secret is not"


def test_a_predecessors_snapshot_is_never_read_the_trainjob_waits_for_it() -> None:
    snapshot = build_snapshot(JOB.set("metadata.uid", "old-uid").obj(), TORCH.source())
    snapshot["metadata"]["uid"] = "snapshot-uid"
    with pytest.raises(Blocked) as raised:
        plan.snapshot_source(JOB.obj(), snapshot, SHIPPED_MODELS)
    assert raised.value.strangers == (
        Stranger(
            ObjectRef("v1", "ConfigMap", "test-job-runtime-snapshot"),
            "snapshot-uid",
            "TrainJob 'test-job' (uid old-uid)",
            predecessor=True,
            deleting=False,
        ),
    )


# --- the status follows this TrainJob's own JobSet only --------------------------------------------------------------

COMPLETED = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed"}


def jobset(*owners: dict[str, Any], suspend: bool = False, **status: Any) -> dict[str, Any]:
    found = obj(ObjectRef(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job"), *owners, uid="js-uid")
    return {**found, "spec": {"suspend": suspend}, "status": status}


STAGES = {
    "a running JobSet of a previous TrainJob of this name does not make this one running": (
        jobset(PREDECESSOR),
        Stage.BUILD,
    ),
    "a running JobSet controlled by no TrainJob does not make this one running": (jobset(), Stage.BUILD),
    "its own running JobSet makes it running": (jobset(owner("uid")), Stage.RUNNING),
}


@pytest.mark.parametrize("case", STAGES.values(), ids=STAGES.keys())
def test_stage_reads_only_its_own_jobset(case: tuple[dict[str, Any], Stage]) -> None:
    found, want = case
    assert plan.stage(JOB.obj(), found) is want


def test_a_completed_jobset_of_a_predecessor_never_completes_this_trainjob() -> None:
    outcome, failure = plan.status(FRAMEWORK, JOB.obj(), jobset(PREDECESSOR, conditions=[COMPLETED]), NOW, RunPolicy())
    assert failure is None
    assert outcome.status.conditions is None
    assert outcome.status.completion_time is None


def test_its_own_completed_jobset_completes_it() -> None:
    outcome, _ = plan.status(FRAMEWORK, JOB.obj(), jobset(owner("uid"), conditions=[COMPLETED]), NOW, RunPolicy())
    assert [(cond.type, cond.status) for cond in outcome.status.conditions or []] == [("Complete", "True")]


def test_a_deadline_deletes_only_its_own_jobset_by_uid() -> None:
    assert plan.delete_jobset(JOB.obj(), jobset(owner("uid"))) == plan.Delete(
        c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default", uid="js-uid"
    )
    assert plan.delete_jobset(JOB.obj(), None) is None


# --- what a blocked TrainJob does --------------------------------------------------------------------------------

JS = ObjectRef(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job")
SECRET = ObjectRef("v1", "Secret", "test-job-mpi-ssh-auth")
OLD_JOBSET = Stranger(JS, "js-old", "TrainJob 'test-job' (uid old-uid)", True, False)
OLD_SECRET = Stranger(SECRET, "secret-old", "TrainJob 'test-job' (uid old-uid)", True, False)
GOING_JOBSET = Stranger(JS, "js-old", "TrainJob 'test-job' (uid old-uid)", True, True)
FOREIGN = Stranger(SECRET, "secret-x", "no controller", False, False)
WAITING_FOR_OLD = (
    "waiting for the objects of a previous TrainJob of this name to be deleted: "
    "JobSet default/test-job (controlled by TrainJob 'test-job' (uid old-uid)); "
    "Secret default/test-job-mpi-ssh-auth (controlled by TrainJob 'test-job' (uid old-uid)); nothing of them is reused"
)


def pending_since(stamp: str) -> TrainJobBuilder:
    condition = {
        "type": c.CONDITION_PENDING,
        "status": "True",
        "reason": c.REASON_PREVIOUS_TRAINJOB,
        "message": "…",
        "lastTransitionTime": stamp,
    }
    return JOB.set("status", {"conditions": [condition]})


WAITS = {
    "a predecessor's JobSet is deleted in the foreground and its Secret in the background, only those incarnations": (
        JOB,
        (OLD_JOBSET, OLD_SECRET),
        plan.Waiting(
            (
                plan.Delete(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default", "Foreground", "js-old"),
                plan.Delete("v1", "Secret", "test-job-mpi-ssh-auth", "default", "Background", "secret-old"),
            ),
            c.REASON_PREVIOUS_TRAINJOB,
            WAITING_FOR_OLD,
            0.5,
            False,
        ),
    ),
    "right after deleting it looks again at once, however long it has waited": (
        pending_since("2026-11-22T11:59:00Z"),
        (OLD_SECRET,),
        plan.Waiting(
            (plan.Delete("v1", "Secret", "test-job-mpi-ssh-auth", "default", "Background", "secret-old"),),
            c.REASON_PREVIOUS_TRAINJOB,
            "waiting for the objects of a previous TrainJob of this name to be deleted: Secret "
            "default/test-job-mpi-ssh-auth (controlled by TrainJob 'test-job' (uid old-uid)); nothing of them is reused",
            0.5,
            False,
        ),
    ),
    "an object being deleted already is waited for, not deleted again": (
        JOB,
        (GOING_JOBSET,),
        plan.Waiting(
            (),
            c.REASON_PREVIOUS_TRAINJOB,
            "waiting for the objects of a previous TrainJob of this name to be deleted: JobSet default/test-job "
            "(controlled by TrainJob 'test-job' (uid old-uid)); nothing of them is reused",
            0.5,
            False,
        ),
    ),
    "an object no TrainJob of this name controls is never deleted: the user is told": (
        JOB,
        (FOREIGN,),
        plan.Waiting(
            (),
            c.REASON_NAME_IN_USE,
            "waiting: objects under this TrainJob's child names are not its own and are left alone: Secret "
            "default/test-job-mpi-ssh-auth (controlled by no controller); delete them, or create the TrainJob under "
            "another name",
            0.5,
            False,
        ),
    ),
    "the wait backs off: 20 s into it, it looks again in 10 s": (
        pending_since("2026-11-22T11:59:40Z"),
        (GOING_JOBSET,),
        plan.Waiting(
            (),
            c.REASON_PREVIOUS_TRAINJOB,
            "waiting for the objects of a previous TrainJob of this name to be deleted: JobSet default/test-job "
            "(controlled by TrainJob 'test-job' (uid old-uid)); nothing of them is reused",
            10.0,
            False,
        ),
    ),
    "past the bound it says the garbage collector has not come, and looks again every 30 s": (
        pending_since("2026-11-22T11:50:00Z"),
        (GOING_JOBSET,),
        plan.Waiting(
            (),
            c.REASON_PREVIOUS_TRAINJOB,
            "waiting for the objects of a previous TrainJob of this name to be deleted: JobSet default/test-job "
            "(controlled by TrainJob 'test-job' (uid old-uid)); nothing of them is reused; still present after "
            "120 s: the garbage collector (kube-controller-manager) has not removed them",
            30.0,
            True,
        ),
    ),
}


@pytest.mark.parametrize("case", WAITS.values(), ids=WAITS.keys())
def test_waiting(case: tuple[TrainJobBuilder, tuple[Stranger, ...], plan.Waiting]) -> None:
    job, strangers, want = case
    assert plan.waiting(job.obj(), strangers, NOW) == want


def test_the_pending_condition_is_set_while_waiting_and_dropped_after() -> None:
    wait = plan.waiting(JOB.obj(), (OLD_JOBSET,), NOW)
    waiting = plan.pending(TrainJobStatus(), wait, NOW)
    assert waiting == TrainJobStatus(
        conditions=[
            Condition(
                type=c.CONDITION_PENDING,
                status="True",
                reason=c.REASON_PREVIOUS_TRAINJOB,
                message=wait.message,
                last_transition_time=STAMP,
            )
        ]
    )
    assert plan.pending(waiting, None, NOW) == TrainJobStatus()


def test_one_event_per_change_of_the_wait_normal_then_warning_when_overdue() -> None:
    wait = plan.waiting(JOB.obj(), (OLD_JOBSET,), NOW)
    first = plan.waiting_event(JOB.obj(), wait, None, NOW)
    assert first is not None
    assert (first["type"], first["reason"], first["message"], first["involvedObject"]["uid"]) == (
        "Normal",
        c.REASON_PREVIOUS_TRAINJOB,
        wait.message,
        "uid",
    )
    assert plan.waiting_event(JOB.obj(), wait, wait.message, NOW) is None
    overdue = plan.waiting(pending_since("2026-11-22T11:50:00Z").obj(), (OLD_JOBSET,), NOW)
    later = plan.waiting_event(JOB.obj(), overdue, wait.message, NOW)
    assert later is not None and later["type"] == "Warning"


# --- the status write lands on this incarnation only --------------------------------------------------------------

REQUESTS = {
    "the first status write is a merge patch locked to the version read": (
        JOB,
        {"state": "Running"},
        plan.StatusRequest(False, {"metadata": {"resourceVersion": "41"}, "status": {"state": "Running"}}),
    ),
    "later writes are JSON patches whose first operation tests the uid, field by field": (
        JOB.set("status", {"state": "Pending", "nodes": 2}),
        {"state": "Running", "nodes": None},
        plan.StatusRequest(
            True,
            [
                {"op": "test", "path": "/metadata/uid", "value": "uid"},
                {"op": "remove", "path": "/status/nodes"},
                {"op": "add", "path": "/status/state", "value": "Running"},
            ],
        ),
    ),
}


@pytest.mark.parametrize("case", REQUESTS.values(), ids=REQUESTS.keys())
def test_status_request(case: tuple[TrainJobBuilder, dict[str, Any], plan.StatusRequest]) -> None:
    job, patch, want = case
    assert plan.status_request(job.obj(), patch, "41") == want


# --- the pieces ----------------------------------------------------------------------------------------------------

OWNERSHIP = {
    "its own uid as controller": ([owner("uid")], True),
    "another uid as controller": ([owner("old-uid")], False),
    "its uid, but not as controller": ([{**owner("uid"), "controller": False}], False),
    "its uid on another kind": ([owner("uid", kind="JobSet")], False),
    "no ownerReferences": ([], False),
}


@pytest.mark.parametrize("case", OWNERSHIP.values(), ids=OWNERSHIP.keys())
def test_owned_by(case: tuple[list[dict[str, Any]], bool]) -> None:
    owners, want = case
    assert owned_by(JOB.obj(), obj(JS, *owners)) is want


def test_a_trainjob_without_a_uid_owns_nothing() -> None:
    assert owned_by(JOB.set("metadata.uid", None).obj(), obj(JS, owner("uid"))) is False


def test_a_same_named_trainjob_of_another_namespace_is_no_predecessor() -> None:
    found = stranger(JOB.obj(), obj(JS, PREDECESSOR, namespace="elsewhere"))
    assert found is not None and found.predecessor is False


def test_the_wait_backs_off_between_bounds() -> None:
    assert [wait_seconds(w) for w in (0, 1, 2, 10, 60, 600)] == [0.5, 0.5, 1.0, 5.0, 30.0, 30.0]


INCARNATIONS = {
    "the same uid is removed": ({"metadata": {"uid": "a"}}, {"metadata": {"uid": "a"}}, True),
    "a predecessor's delete leaves its successor cached": (
        {"metadata": {"uid": "b"}},
        {"metadata": {"uid": "a"}},
        False,
    ),
    "nothing cached: nothing to remove": (None, {"metadata": {"uid": "a"}}, False),
    "an event without a uid removes what is cached": ({"metadata": {"uid": "b"}}, {"metadata": {}}, True),
}


@pytest.mark.parametrize("case", INCARNATIONS.values(), ids=INCARNATIONS.keys())
def test_same_incarnation(case: tuple[dict[str, Any] | None, dict[str, Any], bool]) -> None:
    cached, event, want = case
    assert same_incarnation(cached, event) is want


def test_the_cache_drops_only_the_incarnation_deleted() -> None:
    cache = ObjectCache()
    successor = obj(JS, owner("uid"), uid="js-new", resourceVersion="9")
    cache.put(successor)
    cache.removed(obj(JS, PREDECESSOR, uid="js-old", resourceVersion="5"))
    assert cache.get(("default", "test-job")) == successor
    cache.removed(successor)
    assert cache.get(("default", "test-job")) is None


# --- the UI shows a TrainJob's own JobSet, pods and events only --------------------------------------------------

TRAINJOB = {"metadata": {"name": "test-job", "uid": "uid", "creationTimestamp": "2026-11-22T11:00:00Z"}}


def test_the_ui_shows_no_predecessors_jobset_pods_or_events() -> None:
    theirs = jobset(PREDECESSOR)
    mine = jobset(owner("uid"))
    assert view.own_jobset(TRAINJOB, theirs) is None
    assert view.own_jobset(TRAINJOB, mine) == mine
    pods = [
        {"metadata": {"name": "old", "labels": {c.JOBSET_UID_LABEL: "js-old"}}},
        {"metadata": {"name": "new", "labels": {c.JOBSET_UID_LABEL: "js-uid"}}},
    ]
    assert [p["metadata"]["name"] for p in view.own_pods(mine, pods)] == ["new"]
    assert view.own_pods(None, pods) == []
    events = [
        {"involvedObject": {"kind": c.TRAINJOB_KIND, "uid": "old-uid"}, "lastTimestamp": "2026-11-22T11:30:00Z"},
        {"involvedObject": {"kind": "Job", "name": "test-job-node-0"}, "lastTimestamp": "2026-11-22T10:59:59Z"},
        {"involvedObject": {"kind": c.TRAINJOB_KIND, "uid": "uid"}, "lastTimestamp": "2026-11-22T11:00:01Z"},
        {"involvedObject": {"kind": "Job", "name": "test-job-node-0"}, "lastTimestamp": "2026-11-22T11:00:02Z"},
    ]
    assert view.own_events(TRAINJOB, events) == events[2:]


def test_an_event_in_the_trainjobs_creation_second_is_its_own_whatever_its_precision() -> None:
    """The scheduler's events carry microseconds (`eventTime`); the creation time has seconds only."""
    events: list[dict[str, Any]] = [
        {"involvedObject": {"kind": "Pod", "name": "p"}, "eventTime": "2026-11-22T10:59:59.999999Z"},
        {"involvedObject": {"kind": "Pod", "name": "p"}, "eventTime": "2026-11-22T11:00:00.250000Z"},
        {"involvedObject": {"kind": "Pod", "name": "p"}, "lastTimestamp": "2026-11-22T11:00:00Z"},
        {"involvedObject": {"kind": "Pod", "name": "p"}},
    ]
    assert view.own_events(TRAINJOB, events) == events[1:]
    rows = view.events_of(
        [
            {"involvedObject": {"kind": "Pod", "name": "p"}, "eventTime": "2026-11-22T11:00:01.500000Z", "reason": "B"},
            {"involvedObject": {"kind": "Pod", "name": "p"}, "lastTimestamp": "2026-11-22T11:00:01Z", "reason": "A"},
            {"involvedObject": {"kind": "Pod", "name": "p"}, "lastTimestamp": "2026-11-22T11:00:02Z", "reason": "C"},
        ],
        "test-job",
        ["p"],
    )
    assert [row["reason"] for row in rows] == ["A", "B", "C"], "newest last, whatever the precision"


@pytest.mark.parametrize("case", CHILDREN.values(), ids=CHILDREN.keys())
def test_probes_that_find_nothing_leave_the_plan_as_it_was_but_for_the_probes(case: ChildCase) -> None:
    """The reconciler plans once more after its probes only when one found something (issue 37: the second plan of
    every new TrainJob was 6.5% of the operator's CPU in a burst): reads that found nothing change no write."""
    job = case.job.obj()
    first = plan.children(
        FRAMEWORK, job, case.runtime.source(), Observed(keys=FixedKeys(KEY), status_server=case.status_server)
    )
    nothing = Observed(
        read=dict.fromkeys(first.probes), keys=FixedKeys(KEY), status_server=case.status_server
    )  # what the probes read: None each
    again = plan.children(FRAMEWORK, job, case.runtime.source(), nothing)
    assert again.writes == first.writes
    assert (again.nodes, again.probes) == (first.nodes, ())


@pytest.mark.parametrize("case", CHILDREN.values(), ids=CHILDREN.keys())
def test_each_probe_can_be_created_with_the_body_its_write_would_send(case: ChildCase) -> None:
    """The shell creates a child not known yet instead of reading it first (issue 37): the create carries exactly the
    body the plan would write, probe by probe in order, and nothing the plan does not probe."""
    job = case.job.obj()
    children = plan.children(
        FRAMEWORK, job, case.runtime.source(), Observed(keys=FixedKeys(KEY), status_server=case.status_server)
    )
    bodies = {plan.ref_of(w.obj): w.obj for w in children.writes if not isinstance(w, plan.Delete)}
    creates = plan.probe_creates(children)
    assert list(creates) == list(children.probes)
    assert creates == {ref: plan.Create(bodies[ref]) for ref in children.probes}
    assert all(ref.kind != c.JOBSET_KIND for ref in creates), "the JobSet is watched, never probed"


def test_a_probe_without_a_write_of_its_own_is_read() -> None:
    ref = ObjectRef("v1", "ConfigMap", "elsewhere")
    assert plan.probe_creates(plan.Children(writes=(), probes=(ref,))) == {}
