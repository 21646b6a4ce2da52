"""The reconcile's decisions (runtime/plan.py), pure: which pass a TrainJob gets, the writes of a build, how a
refused apply is judged, which status writes are skipped, the Event body, the snapshot path and the startup
deadline. Tables keyed by sentences; whole-object expectations."""

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pytest

from builders import FixedKeys, RuntimeBuilder, TrainJobBuilder
from trainjob_operator.api import constants as c
from trainjob_operator.api.runtime import SHIPPED_MODELS, RunPolicy
from trainjob_operator.api.trainjob import TrainJobStatus
from trainjob_operator.runtime import plan
from trainjob_operator.runtime.lifecycle import StartupCheck, StuckPod
from trainjob_operator.runtime.observed import ObjectRef, Observed, SSHKeyPair
from trainjob_operator.runtime.pipeline import Framework
from trainjob_operator.runtime.plan import Failure, Stage
from trainjob_operator.runtime.status import StatusOutcome

FRAMEWORK = Framework.from_registry()
NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)
STAMP = "2026-11-22T12:00:00Z"
JOB = TrainJobBuilder.make()
COMPLETE = {
    "type": "Complete",
    "status": "True",
    "reason": "AllJobsCompleted",
    "message": "done",
    "lastTransitionTime": "2026-11-22T11:00:00Z",
}
KEY = SSHKeyPair(private_pem=b"PRIVATE", public_openssh=b"ecdsa-sha2-nistp521 AAAA\n")
SSH_SECRET = ObjectRef("v1", "Secret", "test-job-mpi-ssh-auth")
GROUP = ObjectRef(c.COSCHEDULING_API_VERSION, c.POD_GROUP_KIND, "test-job")
HOSTFILE = ObjectRef("v1", "ConfigMap", "test-job-mpi-hostfile")
MPI = RuntimeBuilder.make().ml_policy(
    num_nodes=2, mpi={"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
)
GANG = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={}).coscheduling()


OWNER = {"apiVersion": c.API_VERSION, "kind": c.TRAINJOB_KIND, "name": "test-job", "uid": "uid", "controller": True}


def jobset(suspend: bool, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.JOBSET_API_VERSION,
        "kind": c.JOBSET_KIND,
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "uid": "js-uid",
            "ownerReferences": [OWNER],
            **meta,
        },
        "spec": {"suspend": suspend},
    }


# --- which pass ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StageCase:
    job: TrainJobBuilder
    jobset: dict[str, Any] | None
    want: Stage


STAGES = {
    "a new TrainJob is built": StageCase(JOB, None, Stage.BUILD),
    "a suspended TrainJob is built (its JobSet is kept suspended)": StageCase(JOB.suspend(), jobset(True), Stage.BUILD),
    "a resumed TrainJob whose JobSet is still suspended is built (resume)": StageCase(JOB, jobset(True), Stage.BUILD),
    "a TrainJob suspended while running is built (suspend)": StageCase(JOB.suspend(), jobset(False), Stage.BUILD),
    "a running JobSet is never re-applied: only the status is followed": StageCase(JOB, jobset(False), Stage.RUNNING),
    "a finished TrainJob is terminal, even with a suspended JobSet": StageCase(
        JOB.set("status", {"conditions": [COMPLETE]}), jobset(True), Stage.FINISHED
    ),
    "a runtimeRef of another API group is unsupported": StageCase(
        JOB.set("spec.runtimeRef.apiGroup", "example.com"), None, Stage.UNSUPPORTED
    ),
    "a runtimeRef of another kind is unsupported": StageCase(
        JOB.set("spec.runtimeRef.kind", "Runtime"), None, Stage.UNSUPPORTED
    ),
}


@pytest.mark.parametrize("case", STAGES.values(), ids=STAGES.keys())
def test_stage(case: StageCase) -> None:
    assert plan.stage(case.job.obj(), case.jobset) == case.want


IGNORED = {
    "a TrainJob of this operator is reconciled": (JOB, False),
    "a TrainJob naming this operator in managedBy is reconciled": (
        JOB.set("spec.managedBy", c.DEFAULT_MANAGED_BY),
        False,
    ),
    "a TrainJob another controller manages is left alone": (
        JOB.set("spec.managedBy", "kueue.x-k8s.io/multikueue"),
        True,
    ),
    "a TrainJob being deleted is left alone": (JOB.set("metadata.deletionTimestamp", STAMP), True),
}


@pytest.mark.parametrize("case", IGNORED.values(), ids=IGNORED.keys())
def test_ignored(case: tuple[TrainJobBuilder, bool]) -> None:
    job, want = case
    assert plan.ignored(job.obj(), job.raw()) is want


def test_an_unsupported_runtime_fails_the_trainjob_and_keeps_the_rest_of_its_status() -> None:
    job = JOB.set("spec.runtimeRef.apiGroup", "example.com").set("status", {"startTime": STAMP})
    assert plan.unsupported(job.obj(), NOW) == StatusOutcome(
        TrainJobStatus.model_validate(
            {
                "startTime": STAMP,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": c.REASON_RUNTIME_NOT_SUPPORTED,
                        "message": "unsupported runtime: TrainingRuntime.example.com",
                        "lastTransitionTime": STAMP,
                    }
                ],
            }
        )
    )


# --- the writes of a build -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildCase:
    job: TrainJobBuilder
    runtime: RuntimeBuilder
    observed: Observed
    writes: list[tuple[str, str, str]]
    """(write, kind, name) in order."""
    probes: tuple[ObjectRef, ...] = ()
    nodes: int | None = 2


def summary(children: plan.Children) -> tuple[list[tuple[str, str, str]], tuple[ObjectRef, ...], int | None]:
    writes = [
        (type(w).__name__, w.kind, w.name)
        if isinstance(w, plan.Delete)
        else (type(w).__name__, w.obj["kind"], w.obj["metadata"]["name"])
        for w in children.writes
    ]
    return writes, children.probes, children.nodes


TORCH = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={})
BUILDS = {
    "a first build applies the JobSet": BuildCase(JOB, TORCH, Observed(), [("Apply", "JobSet", "test-job")]),
    "an MPI TrainJob's SSH Secret is created once, its hostfile applied": BuildCase(
        JOB,
        MPI,
        Observed(keys=FixedKeys(KEY)),
        [
            ("Create", "Secret", "test-job-mpi-ssh-auth"),
            ("Apply", "ConfigMap", "test-job-mpi-hostfile"),
            ("Apply", "JobSet", "test-job"),
        ],
        (HOSTFILE,),
    ),
    "an SSH Secret known to exist is not created again": BuildCase(
        JOB,
        MPI,
        Observed(existing=frozenset({SSH_SECRET, HOSTFILE})),
        [("Apply", "ConfigMap", "test-job-mpi-hostfile"), ("Apply", "JobSet", "test-job")],
    ),
    "a hostfile read this pass and found absent is applied without another read": BuildCase(
        JOB,
        MPI,
        Observed(existing=frozenset({SSH_SECRET}), read={HOSTFILE: None}),
        [("Apply", "ConfigMap", "test-job-mpi-hostfile"), ("Apply", "JobSet", "test-job")],
    ),
    "a PodGroup not known to exist is probed before it is applied": BuildCase(
        JOB, GANG, Observed(), [("Apply", "PodGroup", "test-job"), ("Apply", "JobSet", "test-job")], (GROUP,)
    ),
    "a PodGroup known to exist is not applied again": BuildCase(
        JOB, GANG, Observed(existing=frozenset({GROUP})), [("Apply", "JobSet", "test-job")]
    ),
    "a known PodGroup of a suspended TrainJob is applied (it may be resized)": BuildCase(
        JOB.suspend(),
        GANG,
        Observed(existing=frozenset({GROUP})),
        [("Apply", "PodGroup", "test-job"), ("Apply", "JobSet", "test-job")],
    ),
    "a JobSet being deleted for a rebuild is left to go": BuildCase(
        JOB.suspend(), TORCH, Observed(jobset=jobset(True, deletionTimestamp=STAMP)), []
    ),
}


@pytest.mark.parametrize("case", BUILDS.values(), ids=BUILDS.keys())
def test_children(case: BuildCase) -> None:
    children = plan.children(FRAMEWORK, case.job.obj(), case.runtime.source(), case.observed)
    assert summary(children) == (case.writes, case.probes, case.nodes)


def test_a_resized_suspended_trainjob_deletes_its_jobset_in_the_foreground_instead_of_applying_it() -> None:
    built = plan.children(FRAMEWORK, JOB.suspend().obj(), TORCH.source(), Observed())
    jobset = built.writes[0]
    assert not isinstance(jobset, plan.Delete)
    old = {**jobset.obj, "metadata": {**jobset.obj["metadata"], "uid": "js-uid", "resourceVersion": "5"}}
    resized = plan.children(FRAMEWORK, JOB.suspend().trainer(numNodes=4).obj(), TORCH.source(), Observed(jobset=old))
    assert resized == plan.Children(
        (plan.Delete(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default", "Foreground", "js-uid", "5"),), (), 4
    )


def test_what_the_plugins_cannot_build_is_a_build_failure() -> None:
    flux = RuntimeBuilder.make().ml_policy(num_nodes=1, flux={})
    with pytest.raises(Failure) as raised:
        plan.children(FRAMEWORK, JOB.obj(), flux.source(), Observed())
    assert raised.value == Failure(
        c.REASON_BUILD_FAILED, "spec.trainer is required for a TrainJob whose runtime has mlPolicy.flux"
    )


APPLY_JOBSET = plan.Apply(jobset(True))
READ = jobset(True)
READ["metadata"] = {**READ["metadata"], "uid": "js-uid", "resourceVersion": "7"}
NEVER_RAN = Observed(jobset=READ)
REFUSALS = {
    "a never-run suspended JobSet refusing an immutable change is deleted on resume, only the version read": (
        APPLY_JOBSET,
        422,
        "spec.replicatedJobs: field is immutable",
        NEVER_RAN,
        False,
        plan.Delete(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default", uid="js-uid", resource_version="7"),
    ),
    "while the TrainJob stays suspended such a JobSet is kept as it is (a takeover re-creates nothing)": (
        APPLY_JOBSET,
        422,
        "spec.replicatedJobs: field is immutable",
        NEVER_RAN,
        True,
        plan.Keep(),
    ),
    "a JobSet that runs is never deleted for a refused change": (
        APPLY_JOBSET,
        422,
        "field is immutable",
        Observed(jobset=jobset(False)),
        False,
        None,
    ),
    "a refusal that is not about immutability is a failure": (APPLY_JOBSET, 422, "invalid", NEVER_RAN, False, None),
    "another kind's refusal is a failure": (
        plan.Apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}),
        422,
        "field is immutable",
        NEVER_RAN,
        False,
        None,
    ),
}


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
def test_rebuild_after_refusal(case: tuple[Any, int, str, Observed, bool, plan.Delete | plan.Keep | None]) -> None:
    write, status, message, observed, suspended, want = case
    assert plan.rebuild_after_refusal(FRAMEWORK, write, status, message, observed, suspended) == want


def test_a_failed_write_names_the_verb_and_the_object() -> None:
    secret = plan.Create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"}})
    assert (plan.write_failed(secret, "denied"), plan.write_failed(APPLY_JOBSET, "denied")) == (
        Failure(c.REASON_APPLY_FAILED, "failed to create Secret ns/s: denied"),
        Failure(c.REASON_APPLY_FAILED, "failed to apply JobSet default/test-job: denied"),
    )


# --- the snapshot path -----------------------------------------------------------------------------------------------

SNAPSHOTS = {
    "a missing TrainingRuntime without a snapshot reads as upstream's message": (
        JOB,
        Failure(
            c.REASON_RUNTIME_NOT_FOUND,
            "TrainingRuntime specified in TrainJob is not found: "
            'TrainingRuntime.trainer.kubeflow.org "test-runtime" not found',
        ),
    ),
    "a missing ClusterTrainingRuntime without a snapshot reads as upstream's message": (
        TrainJobBuilder.make(kind=c.CLUSTER_TRAINING_RUNTIME_KIND),
        Failure(
            c.REASON_RUNTIME_NOT_FOUND,
            "not found ClusterTrainingRuntime specified in TrainJob: "
            'ClusterTrainingRuntime.trainer.kubeflow.org "test-runtime" not found',
        ),
    ),
}


@pytest.mark.parametrize("case", SNAPSHOTS.values(), ids=SNAPSHOTS.keys())
def test_snapshot_missing(case: tuple[TrainJobBuilder, Failure]) -> None:
    job, want = case
    with pytest.raises(Failure) as raised:
        plan.snapshot_source(job.obj(), None, SHIPPED_MODELS)
    assert raised.value == want


def test_a_snapshot_of_another_owner_is_an_invalid_snapshot() -> None:
    foreign = {"metadata": {"ownerReferences": [{"controller": True, "uid": "other"}]}, "data": {"runtime": "x"}}
    with pytest.raises(Failure) as raised:
        plan.snapshot_source(JOB.obj(), foreign, SHIPPED_MODELS)
    assert raised.value == Failure(
        c.REASON_INVALID_SNAPSHOT,
        "invalid runtime snapshot: a snapshot configmap exists but is owned by another object",
    )


# --- the status write ------------------------------------------------------------------------------------------------

RUNNING = {"state": "Running", "startTime": STAMP, "conditions": [COMPLETE]}
PATCHES = {
    "an unchanged status writes nothing": (
        {"state": "Running", "startTime": STAMP},
        {"state": "Running", "startTime": STAMP},
        None,
    ),
    "a new TrainJob that is only Pending writes nothing yet": (
        {},
        {"state": "Pending", "startTime": STAMP, "nodes": 2},
        None,
    ),
    "a new TrainJob with restarts writes them": (
        {},
        {"state": "Pending", "restarts": 1},
        {"state": "Pending", "restarts": 1},
    ),
    "a new suspended TrainJob writes its state": ({}, {"state": "Suspended"}, {"state": "Suspended"}),
    "only the fields that changed are patched": (
        {"state": "Running", "startTime": STAMP},
        RUNNING,
        {"conditions": [COMPLETE]},
    ),
    "a field that went away is patched to null": (
        RUNNING,
        {"state": "Running", "startTime": STAMP},
        {"conditions": None},
    ),
}


@pytest.mark.parametrize("case", PATCHES.values(), ids=PATCHES.keys())
def test_status_patch(case: tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]) -> None:
    before, after, want = case
    job = JOB.set("status", before) if before else JOB
    assert plan.status_patch(job.obj(), TrainJobStatus.model_validate(after)) == want


def test_a_failure_sets_reconcile_failed_the_error_state_and_the_node_count() -> None:
    status = plan.final_status(JOB.obj(), StatusOutcome(TrainJobStatus()), Failure("BuildFailed", "bad"), 3, NOW)
    assert status.to_wire() == {
        "state": "Error",
        "reason": "BuildFailed",
        "message": "bad",
        "nodes": 3,
        "conditions": [
            {
                "type": c.CONDITION_RECONCILE_FAILED,
                "status": "True",
                "reason": "BuildFailed",
                "message": "bad",
                "lastTransitionTime": STAMP,
            }
        ],
    }


# --- the Event ------------------------------------------------------------------------------------------------------


def event_of(message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "test-job.", "namespace": "default"},
        "involvedObject": {
            "apiVersion": c.API_VERSION,
            "kind": c.TRAINJOB_KIND,
            "name": "test-job",
            "namespace": "default",
            "uid": "uid",
        },
        "reason": c.EVENT_RESOURCES_CREATION_FAILED,
        "message": message,
        "type": "Warning",
        "action": "Reconciling",
        "reportingComponent": "trainer-trainjob-controller",
        "reportingInstance": "trainjob-operator",
        "source": {"component": "trainer-trainjob-controller"},
        "firstTimestamp": STAMP,
        "lastTimestamp": STAMP,
        "count": 1,
    }


LONG = "x" * 1000
EVENTS = {
    "a new failure records one Warning with upstream's reason and note": (
        "boom",
        None,
        event_of("TrainJob resources reconciliation failed: boom"),
    ),
    "a different failure records another": ("boom", "bang", event_of("TrainJob resources reconciliation failed: boom")),
    "the same failure again records nothing": ("boom", "boom", None),
    "a long note is cut": (LONG, None, event_of(("TrainJob resources reconciliation failed: " + LONG)[:950] + " ...")),
}


@pytest.mark.parametrize("case", EVENTS.values(), ids=EVENTS.keys())
def test_event(case: tuple[str, str | None, dict[str, Any] | None]) -> None:
    message, last, want = case
    assert plan.event(JOB.obj(), Failure("ApplyFailed", message), last, NOW) == want


# --- the startup deadline ---------------------------------------------------------------------------------------------

WAITING = StatusOutcome(TrainJobStatus(), requeue_after=30.0, check_startup=True)
STUCK = StuckPod("test-job-node-0-0", "Unschedulable", "0/1 nodes are available")
STARTUP = {
    "a stuck pod fails the TrainJob and its JobSet goes": (
        StartupCheck(stuck=STUCK),
        StatusOutcome(
            TrainJobStatus.model_validate(
                {
                    "completionTime": STAMP,
                    "conditions": [
                        {
                            "type": "Failed",
                            "status": "True",
                            "reason": c.REASON_STARTUP_DEADLINE_EXCEEDED,
                            "message": "pod test-job-node-0-0 did not start within the startup deadline of 60s (Unschedulable: "
                            "0/1 nodes are available)",
                            "lastTransitionTime": STAMP,
                        }
                    ],
                }
            ),
            delete_jobset=True,
            requeue_after=None,
            check_startup=False,
        ),
    ),
    "pods that all started need no more checks": (StartupCheck(started=True), WAITING),
    "pods still pending are looked at again soon": (
        StartupCheck(),
        StatusOutcome(TrainJobStatus(), requeue_after=10.0, check_startup=True),
    ),
}


@pytest.mark.parametrize("case", STARTUP.values(), ids=STARTUP.keys())
def test_after_startup_check(case: tuple[StartupCheck, StatusOutcome]) -> None:
    check, want = case
    assert plan.after_startup_check(WAITING, check, RunPolicy(startup_deadline_seconds=60), NOW) == want


def test_a_status_step_that_crashes_keeps_the_status_and_reports_a_build_failure() -> None:
    job = JOB.set("status", {"startTime": STAMP}).obj()
    broken = Framework(plugins=())  # no status plugin: the step raises
    assert plan.status(broken, job, None, NOW, RunPolicy()) == (
        StatusOutcome(TrainJobStatus(start_time=STAMP)),
        Failure(c.REASON_BUILD_FAILED, "cannot compute the status: ValueError: no TrainJobStatus plugin is registered"),
    )


# --- applies skipped when this process sent the same body already --------------------------------------------------

CA_CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "test-job-tls-config", "namespace": "default"},
    "data": {"ca.crt": "CA-1"},
}
CA_REF = ObjectRef("v1", "ConfigMap", "test-job-tls-config")
CA_DIGEST = plan.applied_digest(plan.Apply(CA_CONFIGMAP))
JOBSET_APPLY = plan.Apply(jobset(False))


@dataclass(frozen=True)
class UnchangedCase:
    write: plan.Write
    applied: dict[ObjectRef, bytes]
    want: bool


UNCHANGED = {
    "a ConfigMap applied with the same body is skipped": UnchangedCase(
        plan.Apply(CA_CONFIGMAP), {CA_REF: CA_DIGEST or b""}, True
    ),
    "a ConfigMap never applied by this process is applied": UnchangedCase(plan.Apply(CA_CONFIGMAP), {}, False),
    "a ConfigMap whose body changed (a new CA) is applied": UnchangedCase(
        plan.Apply({**CA_CONFIGMAP, "data": {"ca.crt": "CA-2"}}), {CA_REF: CA_DIGEST or b""}, False
    ),
    "the same keys in another order are the same body": UnchangedCase(
        plan.Apply(dict(reversed(CA_CONFIGMAP.items()))), {CA_REF: CA_DIGEST or b""}, True
    ),
    "the JobSet is applied on every build": UnchangedCase(
        JOBSET_APPLY, {ObjectRef(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job"): b"\0" * 16}, False
    ),
    "a create is never skipped here (created once is tracked apart)": UnchangedCase(
        plan.Create(CA_CONFIGMAP), {CA_REF: CA_DIGEST or b""}, False
    ),
}


@pytest.mark.parametrize("case", UNCHANGED.values(), ids=UNCHANGED.keys())
def test_unchanged(case: UnchangedCase) -> None:
    assert plan.unchanged(case.write, case.applied) is case.want


def test_only_applies_of_children_other_than_the_jobset_have_a_digest() -> None:
    assert (plan.applied_digest(JOBSET_APPLY), plan.applied_digest(plan.Create(CA_CONFIGMAP))) == (None, None)
    assert CA_DIGEST is not None and len(CA_DIGEST) == 16
