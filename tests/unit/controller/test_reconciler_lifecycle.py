"""The reconciler executes the lifecycle decisions (issue 13): TTL deletion of the TrainJob itself (this
incarnation only), the startup deadline's pod check, the JobSet rebuild after a resize, the runtime's run policy.
An in-memory client stands in for the API server; the clock is fixed."""

import asyncio
import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pytest

from builders import PodBuilder, RuntimeBuilder, TrainJobBuilder
from fake_client import FakeClient
from trainjob_operator import logs
from trainjob_operator.api import constants as c
from trainjob_operator.api.trainjob import TrainJobStatus
from trainjob_operator.controller.reconciler import Reconciler
from trainjob_operator.controller.store import KnownJob, PodCache, Store
from trainjob_operator.k8s.client import ApiError
from trainjob_operator.metrics import Metrics
from trainjob_operator.runtime import health
from trainjob_operator.runtime.observed import StatusEndpoint
from trainjob_operator.runtime.pipeline import Framework

NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)
EARLIER = "2026-11-22T11:00:00Z"
KEY = ("default", "test-job")
RT = RuntimeBuilder.make().ml_policy(num_nodes=2, torch={})
COMPLETE = {
    "type": "Complete",
    "status": "True",
    "reason": "AllJobsCompleted",
    "message": "done",
    "lastTransitionTime": EARLIER,
}


def fake(
    *objects: dict[str, Any],
    pods: Sequence[dict[str, Any]] = (),
    refuse_jobset: str | None = None,
    delete_conflicts: bool = False,
) -> FakeClient:
    """The fake API holding `objects` and `pods` (labelled as the pods of JobSet js-1); `refuse_jobset`: every apply
    of the JobSet fails with this 422 message (JobSet's webhook refusing a change); `delete_conflicts`: the JobSet
    the API holds changed since OLD_SHAPE was read (a delete's preconditions fail)."""
    client = FakeClient().put(*objects)
    for pod in pods:
        labels = {c.JOBSET_NAME_LABEL: "test-job", c.JOBSET_UID_LABEL: "js-1"}
        client.put(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                **pod,
                "metadata": {"namespace": "default", **pod["metadata"], "labels": labels},
            }
        )
    if refuse_jobset is not None:
        client.fail("apply", ApiError(422, "Invalid", refuse_jobset, {}), kind=c.JOBSET_KIND)
    if delete_conflicts:
        client.put({**OLD_SHAPE, "metadata": {**OLD_SHAPE["metadata"], "resourceVersion": "8"}})
    return client


def trainjob(client: FakeClient) -> dict[str, Any]:
    """The TrainJob as the fake API holds it (its status as written)."""
    stored = client.stored(c.API_VERSION, c.TRAINJOB_KIND, "test-job", "default")
    assert stored is not None
    return stored


def reconciler(client: FakeClient, job: TrainJobBuilder, jobset: dict[str, Any] | None = None) -> Reconciler:
    store = Store()
    store.trainjobs.put(job.raw())
    client.put(job.raw())
    store.runtimes.put(RT.raw())
    if jobset is not None:
        store.jobsets.put(jobset)
    return Reconciler(client, store, Framework.from_registry(), Metrics(), clock=lambda: NOW)


def writes(client: FakeClient) -> list[tuple[Any, ...]]:
    return [call for call in client.calls if call[0] in ("delete", "apply", "patch")]


JOB = TrainJobBuilder.make().set("metadata.creationTimestamp", EARLIER)


def test_an_expired_ttl_deletes_this_trainjob_and_writes_nothing_else() -> None:
    job = JOB.set("spec.ttlSecondsAfterFinished", 60).set(
        "status", {"conditions": [COMPLETE], "completionTime": "2026-11-22T11:58:00Z", "startTime": EARLIER}
    )
    client = FakeClient()
    result = asyncio.run(reconciler(client, job).reconcile(KEY))
    assert writes(client) == [("delete", c.TRAINJOB_KIND, "test-job", "Background", "uid")]
    assert (result.requeue_after, result.error) == (None, False)


def test_a_pending_ttl_requeues_at_expiry() -> None:
    job = JOB.set("spec.ttlSecondsAfterFinished", 600).set(
        "status",
        {"conditions": [COMPLETE], "completionTime": "2026-11-22T11:58:00Z", "startTime": EARLIER, "state": "Complete"},
    )
    client = FakeClient()
    result = asyncio.run(reconciler(client, job).reconcile(KEY))
    assert writes(client) == []
    assert result.requeue_after == 480.0


def test_the_runtimes_ttl_applies_when_the_trainjob_sets_none() -> None:
    runtime_ttl = RT.set("spec.runPolicy", {"ttlSecondsAfterFinished": 30})
    job = JOB.set("status", {"conditions": [COMPLETE], "completionTime": "2026-11-22T11:58:00Z", "startTime": EARLIER})
    client = FakeClient()
    rec = reconciler(client, job)
    rec.store.runtimes.put(runtime_ttl.raw())
    asyncio.run(rec.reconcile(KEY))
    assert writes(client) == [("delete", c.TRAINJOB_KIND, "test-job", "Background", "uid")]


def test_a_trainjob_being_deleted_is_left_alone() -> None:
    job = (
        JOB.set("metadata.deletionTimestamp", EARLIER)
        .set("spec.ttlSecondsAfterFinished", 0)
        .set("status", {"conditions": [COMPLETE], "completionTime": EARLIER})
    )
    client = FakeClient()
    asyncio.run(reconciler(client, job).reconcile(KEY))
    assert client.calls == []


OWNED = [{"apiVersion": c.API_VERSION, "kind": c.TRAINJOB_KIND, "name": "test-job", "uid": "uid", "controller": True}]
"""The controller ownerReference of this TrainJob's children (TrainJobBuilder's uid)."""
RUNNING_JOBSET: dict[str, Any] = {
    "apiVersion": c.JOBSET_API_VERSION,
    "kind": c.JOBSET_KIND,
    "metadata": {"name": "test-job", "namespace": "default", "uid": "js-1", "ownerReferences": OWNED},
    "spec": {"suspend": False},
    "status": {},
}
PODS_OF_JS_1 = "jobset.sigs.k8s.io/jobset-name=test-job,jobset.sigs.k8s.io/jobset-uid=js-1"
"""Only this JobSet's pods: a predecessor's pod under the same JobSet name never fails this TrainJob."""
UNSCHEDULABLE_POD = {
    "metadata": {"name": "test-job-node-0-1"},
    "status": {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}
        ],
    },
}


def test_a_pod_stuck_after_the_startup_deadline_fails_the_trainjob() -> None:
    job = JOB.set("spec.startupDeadlineSeconds", 60).set("status", {"startTime": EARLIER})
    client = fake(pods=[{"metadata": {"name": "test-job-node-0-0"}, "status": {"phase": "Running"}}, UNSCHEDULABLE_POD])
    asyncio.run(reconciler(client, job, RUNNING_JOBSET).reconcile(KEY))
    assert ("list", "Pod", "default", PODS_OF_JS_1) in client.calls
    [status_patch] = [call[3]["status"] for call in client.calls if call[0] == "patch"]
    assert status_patch["conditions"] == [
        {
            "type": "Failed",
            "status": "True",
            "reason": "StartupDeadlineExceeded",
            "message": "pod test-job-node-0-1 did not start within the startup deadline of 60s (Unschedulable: 0/1 "
            "nodes are available)",
            "lastTransitionTime": "2026-11-22T12:00:00Z",
        }
    ]
    assert (status_patch["state"], status_patch["completionTime"]) == ("Failed", "2026-11-22T12:00:00Z")
    assert ("delete", c.JOBSET_KIND, "test-job", "Background", "js-1") in client.calls


def test_started_pods_end_the_startup_checks() -> None:
    job = JOB.set("spec.startupDeadlineSeconds", 60).set("status", {"startTime": EARLIER})
    client = fake(pods=[{"metadata": {"name": "p"}, "status": {"phase": "Running"}}])
    rec = reconciler(client, job, RUNNING_JOBSET)
    assert asyncio.run(rec.reconcile(KEY)).requeue_after is None
    assert asyncio.run(rec.reconcile(KEY)).requeue_after is None
    assert [call for call in client.calls if call[0] == "list"] == [("list", "Pod", "default", PODS_OF_JS_1)]


def test_pods_still_starting_are_checked_again_soon() -> None:
    job = JOB.set("spec.startupDeadlineSeconds", 60).set("status", {"startTime": EARLIER})
    client = fake(pods=[{"metadata": {"name": "p"}, "status": {"phase": "Pending"}}])
    assert asyncio.run(reconciler(client, job, RUNNING_JOBSET).reconcile(KEY)).requeue_after == 10.0
    assert not any(call[0] == "delete" for call in client.calls)


def test_a_resized_suspended_trainjob_gets_its_jobset_rebuilt() -> None:
    job = JOB.suspend().trainer(numNodes=2)
    client = FakeClient()
    rec = reconciler(client, job)
    asyncio.run(rec.reconcile(KEY))  # builds the JobSet for 2 nodes (the fake apply answers it back)
    assert ("apply", c.JOBSET_KIND, "test-job") in client.calls
    client.calls.clear()
    client.put({**job.trainer(numNodes=3).raw(), "status": trainjob(client).get("status")})
    rec.store.trainjobs.put(trainjob(client))
    asyncio.run(rec.reconcile(KEY))
    jobset_writes = [call for call in client.calls if call[1] == c.JOBSET_KIND and call[0] in ("apply", "delete")]
    assert jobset_writes == [("delete", c.JOBSET_KIND, "test-job", "Foreground", "JobSet-uid", "1")]
    client.calls.clear()
    stored = rec.store.jobsets.get(KEY)
    assert stored is not None
    rec.store.jobsets.put(
        {**stored, "metadata": {**stored["metadata"], "deletionTimestamp": EARLIER, "resourceVersion": "2"}}
    )
    asyncio.run(rec.reconcile(KEY))
    assert [call for call in client.calls if call[1] == c.JOBSET_KIND] == [], "waits while the old one goes"
    rec.store.jobsets.remove(KEY)
    asyncio.run(rec.reconcile(KEY))
    assert ("apply", c.JOBSET_KIND, "test-job") in client.calls
    rebuilt = rec.store.jobsets.get(KEY)
    assert rebuilt is not None
    node = next(rj for rj in rebuilt["spec"]["replicatedJobs"] if rj["name"] == c.NODE)
    assert node["template"]["spec"]["parallelism"] == 3


def test_an_unchanged_suspended_trainjob_is_not_rebuilt() -> None:
    job = JOB.suspend().trainer(numNodes=2)
    client = FakeClient()
    rec = reconciler(client, job)
    asyncio.run(rec.reconcile(KEY))
    asyncio.run(rec.reconcile(KEY))
    assert not any(call[0] == "delete" for call in client.calls)


# --- how each child is written (the plugins' declarations) ---------------------------------------------------------

MPI_RT = RuntimeBuilder.make().ml_policy(
    num_nodes=2, mpi={"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
)
GANG_RT = RT.coscheduling()


def child_writes(client: FakeClient) -> list[tuple[Any, ...]]:
    """The reads, creates and applies of the children (the runtime snapshot's aside)."""
    return [
        call[:3]
        for call in client.calls
        if call[0] in ("get", "create", "apply") and not str(call[2]).endswith("-runtime-snapshot")
    ]


def suspended_with(runtime: RuntimeBuilder, client: FakeClient) -> Reconciler:
    rec = reconciler(client, JOB.suspend())
    rec.store.runtimes.put(runtime.raw())
    return rec


def test_an_mpi_ssh_secret_is_created_once_and_never_again() -> None:
    client = FakeClient()
    rec = suspended_with(MPI_RT, client)
    asyncio.run(rec.reconcile(KEY))
    asyncio.run(rec.reconcile(KEY))
    assert child_writes(client) == [
        ("create", "ConfigMap", "test-job-mpi-hostfile"),  # not known yet: created, which says nothing was there
        ("create", "Secret", "test-job-mpi-ssh-auth"),
        ("apply", c.JOBSET_KIND, "test-job"),
        ("apply", c.JOBSET_KIND, "test-job"),  # the hostfile, unchanged, is not applied again
    ]


def test_an_ssh_secret_that_exists_already_counts_as_created() -> None:
    client = fake(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "test-job-mpi-ssh-auth", "namespace": "default", "ownerReferences": OWNED},
        }
    )
    rec = suspended_with(MPI_RT, client)
    assert asyncio.run(rec.reconcile(KEY)).error is False
    asyncio.run(rec.reconcile(KEY))
    assert [call for call in child_writes(client) if call[1] == "Secret"] == [
        ("create", "Secret", "test-job-mpi-ssh-auth"),
        ("get", "Secret", "test-job-mpi-ssh-auth"),  # whose it is: this TrainJob's, so it counts as created
    ]


def test_a_podgroup_is_probed_once_and_applied_again_only_when_it_changes() -> None:
    client = FakeClient()
    rec = suspended_with(GANG_RT, client)
    asyncio.run(rec.reconcile(KEY))
    asyncio.run(rec.reconcile(KEY))
    assert child_writes(client) == [
        ("create", c.POD_GROUP_KIND, "test-job"),  # the probe: a create that succeeds needs no read (issue 37)
        ("apply", c.JOBSET_KIND, "test-job"),
        ("apply", c.JOBSET_KIND, "test-job"),  # unchanged: the JobSet only (a changed body: see the CA test below)
    ]


def test_on_resume_the_jobset_is_the_first_write_unless_the_status_servers_ca_changed() -> None:
    """Kueue's resume: the CA ConfigMap, applied on the first build and unchanged since, does not delay the JobSet
    by a round trip; a CA that changed while suspended is written before the JobSet that starts the pods."""
    client = FakeClient()
    rec = reconciler(client, JOB.suspend())
    rec.status_server = lambda: StatusEndpoint("https://127.0.0.1:10443", "CA-1")
    asyncio.run(rec.reconcile(KEY))
    rec.store.trainjobs.put(JOB.set("spec.suspend", False).raw())
    asyncio.run(rec.reconcile(KEY))
    first = child_writes(client)
    assert first == [
        ("create", "ConfigMap", "test-job-tls-config"),
        ("apply", c.JOBSET_KIND, "test-job"),
        ("apply", c.JOBSET_KIND, "test-job"),
    ]
    client.calls.clear()
    rec = reconciler(client, JOB.suspend())
    rec.status_server = lambda: StatusEndpoint("https://127.0.0.1:10443", "CA-1")
    asyncio.run(rec.reconcile(KEY))
    rec.status_server = lambda: StatusEndpoint("https://127.0.0.1:10443", "CA-2")
    rec.store.trainjobs.put(JOB.set("spec.suspend", False).raw())
    asyncio.run(rec.reconcile(KEY))
    assert child_writes(client) == [
        ("create", "ConfigMap", "test-job-tls-config"),  # another process: not known, and it exists (409)
        ("get", "ConfigMap", "test-job-tls-config"),  # whose: this TrainJob's
        ("apply", "ConfigMap", "test-job-tls-config"),
        ("apply", c.JOBSET_KIND, "test-job"),
        ("apply", "ConfigMap", "test-job-tls-config"),
        ("apply", c.JOBSET_KIND, "test-job"),
    ]


def test_a_podgroup_found_by_the_probe_is_not_applied_again_after_a_restart() -> None:
    client = fake(
        {
            "apiVersion": c.COSCHEDULING_API_VERSION,
            "kind": c.POD_GROUP_KIND,
            "metadata": {"name": "test-job", "namespace": "default", "ownerReferences": OWNED},
        }
    )
    rec = reconciler(client, JOB)
    rec.store.runtimes.put(GANG_RT.raw())
    asyncio.run(rec.reconcile(KEY))
    assert child_writes(client) == [
        ("create", c.POD_GROUP_KIND, "test-job"),  # conflicts: it exists
        ("get", c.POD_GROUP_KIND, "test-job"),  # whose: this TrainJob's, so the plan skips it
        ("apply", c.JOBSET_KIND, "test-job"),
    ]


def test_a_predecessors_child_found_by_the_probes_create_stops_the_build_before_anything_is_written() -> None:
    """The probe's create conflicts: the object is read, and a predecessor's blocks the build (the JobSet is not
    written, nothing is applied over the predecessor's)."""
    client = fake(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "test-job-tls-config",
                "namespace": "default",
                "ownerReferences": [{**OWNED[0], "uid": "old-uid"}],
            },
        }
    )
    rec = reconciler(client, JOB)
    rec.status_server = lambda: StatusEndpoint("https://127.0.0.1:10443", "CA-1")
    asyncio.run(rec.reconcile(KEY))
    assert [call for call in child_writes(client) if call[1] != "Event"] == [
        ("create", "ConfigMap", "test-job-tls-config"),
        ("get", "ConfigMap", "test-job-tls-config"),
    ]
    assert rec.store.jobsets.get(KEY) is None


def test_after_a_probe_conflicts_the_other_probes_are_read_not_created() -> None:
    """Two children not known yet (MPI's hostfile, the status server's CA ConfigMap): the first create conflicts
    (this TrainJob's, left by another process), so the other is read as before, then both are applied."""
    client = fake(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "test-job-mpi-hostfile", "namespace": "default", "ownerReferences": OWNED},
        }
    )
    rec = suspended_with(MPI_RT, client)
    rec.status_server = lambda: StatusEndpoint("https://127.0.0.1:10443", "CA-1")
    assert asyncio.run(rec.reconcile(KEY)).error is False
    assert [call for call in child_writes(client) if call[1] == "ConfigMap"] == [
        ("create", "ConfigMap", "test-job-mpi-hostfile"),
        ("get", "ConfigMap", "test-job-mpi-hostfile"),
        ("get", "ConfigMap", "test-job-tls-config"),
        ("apply", "ConfigMap", "test-job-mpi-hostfile"),
        ("apply", "ConfigMap", "test-job-tls-config"),
    ]


def test_a_probes_create_the_api_server_refuses_fails_as_the_apply_did() -> None:
    client = FakeClient().fail("create", ApiError(403, "Forbidden", "podgroups is forbidden"), kind=c.POD_GROUP_KIND)
    rec = suspended_with(GANG_RT, client)
    assert asyncio.run(rec.reconcile(KEY)).error is True
    [event] = [obj for obj in client.objects.values() if obj["kind"] == "Event"]
    assert event["message"].endswith("failed to apply PodGroup default/test-job: podgroups is forbidden")
    assert not [call for call in client.calls if call[1] == c.JOBSET_KIND]


# --- D24 rebuilds: only on resume, only the version read (issue 17) ------------------------------------------------

IMMUTABLE = (
    'JobSet.jobset.x-k8s.io "test-job" is invalid: spec.replicatedJobs: Invalid value: [...]: field is immutable'
)


def _old_shape() -> dict[str, Any]:
    """A suspended JobSet that never ran, of the same size, built by another controller (or an older version):
    JobSet refuses ours (another env, say) as immutable."""
    client = FakeClient()
    rec = reconciler(client, JOB.suspend())
    asyncio.run(rec.reconcile(KEY))
    built = rec.store.jobsets.get(KEY)
    assert built is not None
    return {
        **built,
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "uid": "old-uid",
            "resourceVersion": "7",
            "ownerReferences": OWNED,
        },
        "status": {},
    }


OLD_SHAPE = _old_shape()


def jobset_calls(client: FakeClient) -> list[tuple[Any, ...]]:
    return [call for call in client.calls if call[1] == c.JOBSET_KIND]


def test_a_suspended_older_shape_jobset_is_kept_while_the_trainjob_stays_suspended() -> None:
    """Taking over upstream's suspended JobSets re-creates none: the rebuild waits for the resume."""
    client = fake(refuse_jobset=IMMUTABLE)
    rec = reconciler(client, JOB.suspend(), OLD_SHAPE)
    result = asyncio.run(rec.reconcile(KEY))
    assert jobset_calls(client) == [("apply", c.JOBSET_KIND, "test-job")]
    assert result.error is False
    assert rec.store.jobsets.get(KEY) == OLD_SHAPE
    assert all("ReconcileFailed" not in str(call) for call in client.calls if call[0] == "patch")


def test_on_resume_a_never_started_older_shape_jobset_is_rebuilt_once_only_the_version_read() -> None:
    client = fake()
    rec = reconciler(client, JOB, OLD_SHAPE)
    # refused once; once deleted, the next apply creates the JobSet in the current shape
    client.fail("apply", ApiError(422, "Invalid", IMMUTABLE, {}), kind=c.JOBSET_KIND, times=1)
    asyncio.run(rec.reconcile(KEY))
    assert jobset_calls(client) == [
        ("apply", c.JOBSET_KIND, "test-job"),
        ("delete", c.JOBSET_KIND, "test-job", "Background", "old-uid", "7"),
        ("apply", c.JOBSET_KIND, "test-job"),
    ]


def test_a_stale_view_of_a_resumed_jobset_deletes_and_recreates_nothing() -> None:
    """After a failover the cache may still show the JobSet suspended and never run while the old leader resumed it:
    the delete's uid and resourceVersion preconditions fail, and nothing is created again."""
    client = fake(refuse_jobset=IMMUTABLE, delete_conflicts=True)
    rec = reconciler(client, JOB, OLD_SHAPE)
    result = asyncio.run(rec.reconcile(KEY))
    assert jobset_calls(client) == [
        ("apply", c.JOBSET_KIND, "test-job"),
        ("delete", c.JOBSET_KIND, "test-job", "Background", "old-uid", "7"),
    ]
    assert result.error is False


def test_a_jobset_that_ran_is_never_rebuilt_whatever_it_refuses() -> None:
    ran = {**OLD_SHAPE, "status": {"replicatedJobsStatus": [{"name": "node", "active": 1}]}}
    client = fake(refuse_jobset=IMMUTABLE)
    rec = reconciler(client, JOB, ran)
    result = asyncio.run(rec.reconcile(KEY))
    assert jobset_calls(client) == [("apply", c.JOBSET_KIND, "test-job")]
    assert result.error is True


def test_a_resize_deletes_only_the_version_read() -> None:
    client = fake(delete_conflicts=True)
    rec = reconciler(client, JOB.suspend().trainer(numNodes=3), OLD_SHAPE)
    asyncio.run(rec.reconcile(KEY))
    assert jobset_calls(client) == [("delete", c.JOBSET_KIND, "test-job", "Foreground", "old-uid", "7")]


# --- issue 27: the pods' health ------------------------------------------------------------------------------------


def with_pods(client: FakeClient, pods: list[dict[str, Any]]) -> Reconciler:
    jobset = {
        "apiVersion": c.JOBSET_API_VERSION,
        "kind": c.JOBSET_KIND,
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "uid": "jobset-uid",
            "resourceVersion": "5",
            "ownerReferences": OWNED,
        },
        "spec": {"suspend": False},
        "status": {"restarts": 0},
    }
    rec = reconciler(client, JOB.set("status", {"startTime": EARLIER}), jobset)
    rec.store.pods = PodCache()
    for pod in pods:
        rec.store.pods.put(pod)
    return rec


def test_a_crash_loop_shows_in_the_status_and_gives_one_warning_event_however_often_it_is_seen() -> None:
    client = FakeClient()
    rec = with_pods(client, [PodBuilder.make().crash_looping(restarts=2, exit_code=7).raw()])
    asyncio.run(rec.reconcile(KEY))
    assert rec.store.pods is not None
    rec.store.pods.put(PodBuilder.make().crash_looping(restarts=3, exit_code=7).raw())
    asyncio.run(rec.reconcile(KEY))
    status = trainjob(client)["status"]
    assert (status["state"], status["reason"], status["restarts"]) == ("Restarting", "CrashLoopBackOff", 3)
    assert "exited with code 7" in status["message"]
    events = [call for call in client.calls if call[:2] == ("create", "Event")]
    assert len(events) == 1 and events[0][2].startswith("test-job."), "one Warning Event for the same failure"


def test_a_warning_event_that_exists_already_is_not_an_error() -> None:
    event_name = health.warning_event(
        JOB.obj(),
        health.assess(
            JOB.obj(), TrainJobStatus(), {"metadata": {"name": "test-job"}}, [PodBuilder.make().failed(1).raw()]
        ).warnings[0],
        "t",
    )["metadata"]["name"]
    client = fake({"apiVersion": "v1", "kind": "Event", "metadata": {"name": event_name, "namespace": "default"}})
    rec = with_pods(client, [PodBuilder.make().failed(1).raw()])
    result = asyncio.run(rec.reconcile(KEY))
    assert not result.error and trainjob(client)["status"]["state"] == "Restarting"


def test_pod_events_queue_the_trainjob_only_when_what_the_operator_reads_changed() -> None:
    cache = PodCache()
    pod = PodBuilder.make().running()
    assert cache.put(pod.raw()) == ("default", "test-job")
    assert cache.put(pod.set("metadata.resourceVersion", "99").set("spec.nodeName", "elsewhere").raw()) is None
    assert cache.put(pod.running(restarts=1, last_exit=1).raw()) == ("default", "test-job")
    assert [p["metadata"]["name"] for p in cache.of_jobset(("default", "test-job"))] == ["test-job-node-0-0-abcde"]
    assert cache.remove(pod.raw()) == ("default", "test-job") and cache.of_jobset(("default", "test-job")) == []
    assert cache.remove(pod.raw()) is None and len(cache) == 0


def test_one_info_line_per_jobset_built_or_rebuilt(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("json", "INFO")
    job = JOB.set("metadata.uid", "tj-uid").suspend().trainer(numNodes=2)
    client = FakeClient()
    rec = reconciler(client, job)
    asyncio.run(rec.reconcile(KEY))  # built
    asyncio.run(rec.reconcile(KEY))  # nothing changed: nothing said
    client.put({**job.trainer(numNodes=3).raw(), "status": trainjob(client).get("status")})
    rec.store.trainjobs.put(trainjob(client))
    asyncio.run(rec.reconcile(KEY))  # resized: the old JobSet deleted
    rec.store.jobsets.remove(KEY)
    asyncio.run(rec.reconcile(KEY))  # rebuilt
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    said = [
        (line["event"], line["name"], line["nodes"], line["uid"])
        for line in lines
        if line["event"] in ("JobSet built", "JobSet rebuilt")
    ]
    assert said == [("JobSet built", "test-job", 2, "tj-uid"), ("JobSet rebuilt", "test-job", 3, "tj-uid")]


def test_a_status_write_that_lands_on_another_incarnation_is_refused_and_dropped() -> None:
    """The TrainJob was deleted and created again under its name while this pass ran: the JSON patch's uid test
    fails (a bare 422) and the status of the incarnation read is not written on the new one, nor is it an error."""

    client = FakeClient()
    job = JOB.set("status", {"state": "Pending", "startTime": EARLIER})
    rec = reconciler(client, job, RUNNING_JOBSET)
    client.put(job.set("metadata.uid", "the-successor").raw())
    client.fail("patch", ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {}))
    result = asyncio.run(rec.reconcile(KEY))
    assert any(call[0] == "patch" for call in client.calls)
    assert trainjob(client)["metadata"]["uid"] == "the-successor" and trainjob(client)["status"] == job.raw()["status"]
    assert result.error is False


def test_a_status_patch_refused_by_the_same_incarnation_is_dropped_with_a_warning_not_a_crash(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its status changed since this replica read it (a former leader removed a field this patch removes too): the
    JSON patch fails (a bare 422) on the same uid. Nothing is written, the pass is no error (the change's watch event
    brings the TrainJob back), and a warning says why (chaos: hostile-network, a leadership flap)."""
    logs.configure("json", "INFO")
    client = FakeClient()
    job = JOB.set("status", {"state": "Pending", "startTime": EARLIER})
    rec = reconciler(client, job, RUNNING_JOBSET)
    client.fail("patch", ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {}))
    result = asyncio.run(rec.reconcile(KEY))
    assert any(call[0] == "patch" for call in client.calls)
    assert trainjob(client)["status"] == job.raw()["status"]
    assert result.error is False
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    [warned] = [line for line in lines if line["event"].startswith("status patch refused")]
    assert (warned["level"], warned["name"]) == ("warning", "test-job")


def test_a_pods_delete_removes_only_that_incarnation_and_the_index_follows_its_jobset() -> None:
    """A DELETED event for a pod of another uid (a predecessor's, seen late after a relist) leaves the cached pod of
    that name; a pod whose JobSet label changed is listed under its JobSet only, and nothing of it stays indexed
    once it is gone (memory bounded)."""
    cache = PodCache()
    mine = PodBuilder.make(jobset_uid="js-new").running()
    cache.put(mine.raw())
    assert cache.remove(mine.set("metadata.uid", "a-predecessors-pod").raw()) is None
    assert [p["metadata"]["uid"] for p in cache.of_jobset(KEY)] == [mine.raw()["metadata"]["uid"]]
    moved = mine.set("metadata.labels", {**mine.raw()["metadata"]["labels"], c.JOBSET_NAME_LABEL: "other"})
    cache.put(moved.raw())
    assert cache.of_jobset(KEY) == [] and len(cache.of_jobset(("default", "other"))) == 1
    assert cache.remove(moved.raw()) == ("default", "other")
    assert len(cache) == 0 and cache._by_jobset == {}


def known_of(store: Store, uid: str) -> dict[str, Any]:
    """Whatever the store remembers of one TrainJob uid (empty: nothing): the fields of its record that are set."""
    job = store.known.get(uid)
    if job is None:
        return {}
    empty = KnownJob()
    return {name: getattr(job, name) for name in KnownJob.__slots__ if getattr(job, name) != getattr(empty, name)}


def test_a_trainjob_deleted_while_its_pass_runs_leaves_nothing_remembered_of_its_uid() -> None:
    """The DELETED event arrives while a pass of that TrainJob awaits its writes: what the pass records after it
    (nodes, applied digests, the snapshot, warned keys) would stay forever, one set per deleted TrainJob."""
    from trainjob_operator.config import OperatorConfig
    from trainjob_operator.controller.main import Manager

    job = JOB.trainer(numNodes=2)

    async def scenario() -> Store:
        client = FakeClient().put(job.raw())
        manager = Manager(OperatorConfig(), client)

        def deleted_meanwhile(call: tuple[Any, ...]) -> None:
            if call[:2] == ("apply", c.JOBSET_KIND):  # the manager handles the TrainJob's DELETED event meanwhile
                manager.on_trainjob({"type": "DELETED", "object": job.raw()})

        client.on_call = deleted_meanwhile
        manager.status_ca = "a CA"
        manager.store.runtimes.put(RT.raw())
        manager.on_trainjob({"type": None, "object": job.raw()})
        await manager.reconciler.reconcile(KEY)
        assert ("apply", c.JOBSET_KIND, "test-job") in client.calls
        return manager.store

    store = asyncio.run(scenario())
    assert store.trainjobs.get(KEY) is None
    assert known_of(store, "uid") == {}


def test_a_successor_cached_without_its_predecessors_delete_event_frees_the_predecessors_uid() -> None:
    """A watch that lists again after a gap sees the TrainJob of that name with a new uid and never the old one's
    DELETED event: what was remembered of the old uid goes when the new one takes its place in the cache."""
    from trainjob_operator.config import OperatorConfig
    from trainjob_operator.controller.main import Manager

    manager = Manager(OperatorConfig(), FakeClient())
    manager.on_trainjob({"type": None, "object": JOB.raw()})
    manager.store.known.of("uid").nodes = 2
    manager.store.known.of("uid").warned = {"failed/node/node/1"}
    manager.on_trainjob({"type": None, "object": JOB.set("metadata.uid", "successor").raw()})
    assert known_of(manager.store, "uid") == {}
    manager.store.known.of("successor").nodes = 3
    manager.on_trainjob({"type": "MODIFIED", "object": JOB.set("metadata.uid", "successor").raw()})
    assert known_of(manager.store, "successor") == {"nodes": 3}, "the same incarnation keeps what it has"


def test_a_listing_after_a_watch_gap_drops_what_was_deleted_during_the_gap() -> None:
    """kopf lists again after a 410 or a failed stream, and sends no DELETED event for what went meanwhile: what
    the new listing lacks is gone, as a client-go informer's Replace says. Else a deleted pod stays its JobSet's
    for good (STATE, RESTARTS), a deleted TrainJob stays cached, counted and reconciled, and memory grows."""
    from trainjob_operator.config import OperatorConfig
    from trainjob_operator.controller.main import Manager

    manager = Manager(OperatorConfig(), FakeClient())
    manager.store.pods = PodCache()
    manager.listings_replace = True  # paged listings
    kept_job, gone_job = JOB, JOB.set("metadata.name", "gone").set("metadata.uid", "gone-uid")
    kept_pod, gone_pod = PodBuilder.make().running(), PodBuilder.make(index=1, suffix="zzzzz").running()
    gone_jobset = {**RUNNING_JOBSET, "metadata": {**RUNNING_JOBSET["metadata"], "name": "gone", "uid": "js-gone"}}
    jobset_kind = next(k for k in manager.watched if k.kind == c.JOBSET_KIND)

    def listing(jobs: list[TrainJobBuilder], pods: list[PodBuilder], jobsets: list[dict[str, Any]]) -> None:
        for job in jobs:
            manager.on_trainjob({"type": None, "object": job.raw()})
        manager.on_listed("trainjobs", None)
        for pod in pods:
            manager.on_pod({"type": None, "object": pod.raw()})
        manager.on_listed("pods", None)
        for jobset in jobsets:
            manager.on_child(jobset_kind, {"type": None, "object": jobset})
        manager.on_listed(jobset_kind.plural, None)

    listing([kept_job, gone_job], [kept_pod, gone_pod], [RUNNING_JOBSET, gone_jobset])
    manager.store.known.of("gone-uid").nodes = 2
    assert (len(manager.store.trainjobs), len(manager.store.pods), len(manager.store.jobsets)) == (2, 2, 2)
    assert manager.state_counts == {"Pending": 2}

    listing([kept_job], [kept_pod], [RUNNING_JOBSET])  # the same watches, listing again after a gap
    assert manager.store.trainjobs.snapshot_keys() == [KEY] and manager.store.jobsets.snapshot_keys() == [KEY]
    assert [p["metadata"]["name"] for p in manager.store.pods.of_jobset(KEY)] == [kept_pod.raw()["metadata"]["name"]]
    assert manager.state_counts == {"Pending": 1} and known_of(manager.store, "gone-uid") == {}

    listing([], [], [])  # everything went
    assert (len(manager.store.trainjobs), len(manager.store.pods), len(manager.store.jobsets)) == (0, 0, 0)

    listing([kept_job], [kept_pod], [RUNNING_JOBSET])
    manager.listings_replace = False  # streamed: a listing may lack what exists (a stream resumed mid-listing)
    listing([], [], [])
    assert (len(manager.store.trainjobs), len(manager.store.pods), len(manager.store.jobsets)) == (1, 1, 1)
