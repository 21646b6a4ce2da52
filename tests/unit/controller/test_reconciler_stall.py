"""Issue 35: the reconciler executes the stall decisions (runtime/stall.py, plan.watch_progress) and the goodput
accounting: the status and one Warning Event, the restart recorded before the JobSet is deleted, never twice across
operator restarts, the requeue at the limit, the counters. An in-memory client stands in for the API server; the
clock is set by the test."""

import asyncio
import datetime as dt
from typing import Any

import pytest

from builders import PodBuilder, RuntimeBuilder, TrainJobBuilder
from fake_client import FakeClient
from trainjob_operator.api import constants as c
from trainjob_operator.controller.reconciler import Reconciler
from trainjob_operator.controller.store import PodCache, Store
from trainjob_operator.metrics import Metrics
from trainjob_operator.runtime.conditions import rfc3339
from trainjob_operator.runtime.pipeline import Framework

T0 = dt.datetime(2026, 11, 28, 12, 0, 0, tzinfo=dt.UTC)
KEY = ("default", "test-job")
RT = RuntimeBuilder.make().ml_policy(num_nodes=1, torch={})
OWNED = [{"apiVersion": c.API_VERSION, "kind": c.TRAINJOB_KIND, "name": "test-job", "uid": "uid", "controller": True}]


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def jobset(max_restarts: int | None = 2, restarts: int = 0, uid: str = "jobset-uid") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "suspend": False,
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "spec": {
                        "parallelism": 2,
                        "template": {
                            "spec": {"containers": [{"name": "node", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
                        },
                    }
                },
            }
        ],
    }
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    return {
        "apiVersion": c.JOBSET_API_VERSION,
        "kind": c.JOBSET_KIND,
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "uid": uid,
            "resourceVersion": "5",
            "ownerReferences": OWNED,
        },
        "spec": spec,
        "status": {"restarts": restarts},
    }


def training_job(
    action: str, reported: float | None = 100, goodput_restart_of: str | None = None, **status: Any
) -> TrainJobBuilder:
    """Running since T0 (as the goodput says), its last report at T0+`reported`, a 60 s limit."""
    body: dict[str, Any] = {
        "startTime": rfc3339(at(-30)),
        "state": "Running",
        "restarts": 0,
        "goodput": {
            "phase": "Training",
            "since": rfc3339(at(0)),
            "startingSeconds": 30,
            "accelerators": 8,
            "firstProgressSeconds": 130,
            **({"restartOf": goodput_restart_of} if goodput_restart_of else {}),
        },
        **status,
    }
    if reported is not None:
        body["trainerStatus"] = {
            "lastUpdatedTime": rfc3339(at(reported)),
            "progressPercentage": 40,
            "metrics": [{"name": "step", "value": "400"}],
        }
    return (
        TrainJobBuilder.make()
        .set("metadata.creationTimestamp", rfc3339(at(-30)))
        .set("spec.stallPolicy", {"progressTimeoutSeconds": 60, "action": action})
        .set("status", body)
    )


class Operator:
    """One operator process over the fake API: its own store (caches filled from the API) and metrics."""

    def __init__(self, client: FakeClient, now: float) -> None:
        self.clock = at(now)
        store = Store()
        trainjob = client.stored(c.API_VERSION, c.TRAINJOB_KIND, "test-job", "default")
        assert trainjob is not None
        store.trainjobs.put(trainjob)
        store.runtimes.put(RT.raw())
        found = client.stored(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default")
        if found is not None:
            store.jobsets.put(found)
        store.pods = PodCache()
        store.pods.put(PodBuilder.make().running().raw())
        self.metrics = Metrics()
        self.reconciler = Reconciler(client, store, Framework.from_registry(), self.metrics, clock=lambda: self.clock)

    def reconcile(self, now: float) -> float | None:
        self.clock = at(now)
        return asyncio.run(self.reconciler.reconcile(KEY)).requeue_after

    def sample(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(
            name, {"trainjob_namespace": "default", "runtime": "test-runtime", **labels}
        )


def api(job: TrainJobBuilder, js: dict[str, Any] | None) -> FakeClient:
    client = FakeClient().put(job.raw())
    if js is not None:
        client.put(js)
    return client


def status(client: FakeClient) -> dict[str, Any]:
    stored = client.stored(c.API_VERSION, c.TRAINJOB_KIND, "test-job", "default")
    assert stored is not None
    return stored["status"]  # type: ignore[no-any-return]


def jobset_deletes(client: FakeClient) -> list[tuple[Any, ...]]:
    return [call for call in client.calls if call[:2] == ("delete", c.JOBSET_KIND)]


def events(client: FakeClient) -> list[dict[str, Any]]:
    return [obj for (_, kind, _ns, _name), obj in client.objects.items() if kind == "Event"]


def test_within_the_limit_nothing_is_written_and_the_trainjob_comes_back_when_it_passes() -> None:
    client = api(training_job("Report"), jobset())
    op = Operator(client, 130)
    assert op.reconcile(130) == 30.0
    assert [call for call in client.calls if call[0] in ("patch", "delete", "create")] == []


def test_report_past_the_limit_says_stalled_once_with_the_last_reports_time_and_step() -> None:
    client = api(training_job("Report"), jobset())
    op = Operator(client, 175)
    op.reconcile(175)
    got = status(client)
    assert (got["state"], got["reason"]) == ("Stalled", "ProgressStalled")
    assert got["goodput"] == {
        "phase": "Stalled",
        "since": rfc3339(at(160)),
        "queuedSeconds": 0,
        "startingSeconds": 30,
        "trainingSeconds": 160,
        "restartingSeconds": 0,
        "stalledSeconds": 0,
        "accelerators": 8,
        "percent": 84,
        "stalls": 1,
        "stalledReport": rfc3339(at(100)),
        "firstProgressSeconds": 130,
    }
    assert "conditions" not in got, "no condition while it runs: the SDK still says Running"
    [event] = events(client)
    assert (event["type"], event["reason"]) == ("Warning", "TrainJobStalled")
    assert "the last at 2026-11-28T12:01:40Z, step 400, progress 40%" in event["message"]
    assert jobset_deletes(client) == []
    assert op.sample("trainjob_operator_stalls_total", action="Report") == 1
    assert op.sample("trainjob_operator_goodput_seconds_total", phase="Training") == 160
    # Seen again, by this operator or a restarted one: nothing more is written or counted.
    calls = len(client.calls)
    op.reconcile(400)
    again = Operator(client, 500)
    again.reconcile(500)
    assert [call for call in client.calls[calls:] if call[0] in ("patch", "delete", "create")] == []
    assert again.sample("trainjob_operator_stalls_total", action="Report") is None
    assert len(events(client)) == 1


def test_a_newer_report_ends_the_stall_and_training_counts_from_it() -> None:
    client = api(training_job("Report"), jobset())
    Operator(client, 175).reconcile(175)
    stored = client.stored(c.API_VERSION, c.TRAINJOB_KIND, "test-job", "default")
    assert stored is not None
    stored["status"]["trainerStatus"]["lastUpdatedTime"] = rfc3339(at(200))
    requeue = Operator(client, 205).reconcile(205)
    got = status(client)
    assert (got["state"], got["goodput"]["phase"], got["goodput"]["since"]) == ("Running", "Training", rfc3339(at(200)))
    assert (got["goodput"]["stalledSeconds"], requeue) == (40, 55.0)


def test_restart_records_the_restart_then_deletes_the_jobset_once_across_operator_restarts() -> None:
    client = api(training_job("Restart"), jobset(max_restarts=2))
    op = Operator(client, 175)
    op.reconcile(175)
    got = status(client)
    assert (got["state"], got["restarts"], got["goodput"]["restartOf"]) == ("Stalled", 1, "jobset-uid")
    assert "restarting the JobSet (1 of its restarts left)" in got["message"]
    assert jobset_deletes(client) == [("delete", c.JOBSET_KIND, "test-job", "Foreground", "jobset-uid")]
    assert op.sample("trainjob_operator_stalls_total", action="Restart") == 1
    # The operator died before the delete landed: the JobSet is still there. A new one deletes it again, counts
    # nothing again.
    client.put(jobset(max_restarts=2))
    again = Operator(client, 180)
    again.reconcile(180)
    assert status(client)["restarts"] == 1
    assert len(jobset_deletes(client)) == 2
    assert again.sample("trainjob_operator_stalls_total", action="Restart") is None
    # Gone: the JobSet is built again with the restart counted against maxRestarts; the progress history is kept.
    client.objects.pop((c.JOBSET_API_VERSION, c.JOBSET_KIND, "default", "test-job"), None)
    third = Operator(client, 190)
    third.reconciler.store.jobsets.remove(KEY)
    third.reconciler.store.pods = PodCache()
    third.reconcile(190)
    built = client.stored(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default")
    assert built is not None
    assert built["metadata"]["annotations"][c.RESTARTS_BEFORE_ANNOTATION] == "1"
    after = status(client)
    assert after["trainerStatus"]["lastUpdatedTime"] == rfc3339(at(100))
    assert (after["restarts"], after["goodput"]["phase"]) == (1, "Restarting")


def test_an_operator_down_from_the_delete_to_the_rebuild_finds_the_new_attempt_training_not_stalled() -> None:
    """The writes that end a restart's stall (Stalled until the old JobSet is gone, then Restarting) were lost: the
    status still says the stall of the JobSet it restarted while a new JobSet runs. The stall ended with its JobSet,
    so the new attempt trains from now on, and is neither deleted nor counted stalled again."""
    client = api(training_job("Restart"), jobset(max_restarts=2))
    Operator(client, 175).reconcile(175)
    assert status(client)["goodput"]["restartOf"] == "jobset-uid"
    client.put(jobset(max_restarts=2, uid="jobset-2"))  # the rebuild, its status write lost
    op = Operator(client, 300)
    op.reconciler.store.pods = PodCache()
    op.reconciler.store.pods.put(PodBuilder.make(jobset_uid="jobset-2").running().raw())
    op.reconcile(300)
    got = status(client)
    assert (got["state"], got["goodput"]["phase"], got["goodput"]["since"]) == ("Running", "Training", rfc3339(at(300)))
    assert (got["goodput"]["stalls"], got["goodput"]["stalledSeconds"]) == (1, 140)
    assert jobset_deletes(client) == [("delete", c.JOBSET_KIND, "test-job", "Foreground", "jobset-uid")]
    assert len(events(client)) == 1
    assert op.sample("trainjob_operator_stalls_total", action="Restart") is None


def test_a_stall_not_restarted_keeps_no_restart_of_an_earlier_stall_and_stays_stalled() -> None:
    """restartOf names the JobSet of this stall's restart or nothing: one left by an earlier stall (whose JobSet is
    long gone) must not make a stall that is only reported look restarted, which would end it at the next pass."""
    client = api(training_job("Report", goodput_restart_of="older-jobset"), jobset())
    Operator(client, 175).reconcile(175)
    got = status(client)
    assert (got["state"], got["goodput"]["phase"], got["goodput"]["stalls"]) == ("Stalled", "Stalled", 1)
    assert "restartOf" not in got["goodput"]
    Operator(client, 240).reconcile(240)
    assert (status(client)["state"], status(client)["goodput"]["phase"]) == ("Stalled", "Stalled")
    assert len(events(client)) == 1


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param("terminating", id="its pods terminating (deleted, not gone yet)"),
        pytest.param("gone", id="its pods gone, the JobSet not yet"),
    ],
)
def test_the_state_says_stalled_until_the_stalled_jobset_is_gone(pods: str) -> None:
    """A restart's teardown is still the stall: the stalled attempt's pods hold their nodes until they are gone, so
    `kubectl get` and the UI say Stalled (not Pending) until the JobSet is gone, and the goodput counts it stalled;
    the JobSet being deleted is not deleted again."""
    client = api(training_job("Restart"), jobset(max_restarts=2))
    Operator(client, 175).reconcile(175)
    deleting = jobset(max_restarts=2)
    deleting["metadata"]["deletionTimestamp"] = rfc3339(at(175))
    client.put(deleting)
    op = Operator(client, 178)
    op.reconciler.store.pods = PodCache()
    if pods == "terminating":
        op.reconciler.store.pods.put(
            PodBuilder.make().running().set("metadata.deletionTimestamp", rfc3339(at(176))).raw()
        )
    op.reconcile(178)
    got = status(client)
    assert (got["state"], got["reason"], got["goodput"]["phase"]) == ("Stalled", "ProgressStalled", "Stalled")
    assert "restarting the JobSet" in got["message"]
    assert len(jobset_deletes(client)) == 1


@pytest.mark.parametrize(
    ("max_restarts", "restarts"),
    [pytest.param(None, 0, id="no maxRestarts"), pytest.param(0, 0, id="spent: maxRestarts 0 left")],
)
def test_restart_without_a_restart_left_fails_the_trainjob(max_restarts: int | None, restarts: int) -> None:
    client = api(training_job("Restart"), jobset(max_restarts=max_restarts, restarts=restarts))
    Operator(client, 175).reconcile(175)
    got = status(client)
    [failed] = got["conditions"]
    assert (failed["type"], failed["reason"], got["state"]) == ("Failed", "ProgressStalled", "Failed")
    assert "no restart left" in failed["message"]
    assert jobset_deletes(client) == [("delete", c.JOBSET_KIND, "test-job", "Background", "jobset-uid")]


def test_fail_fails_the_trainjob_with_a_reason_and_stops_its_pods() -> None:
    client = api(training_job("Fail"), jobset())
    op = Operator(client, 175)
    op.reconcile(175)
    got = status(client)
    [failed] = got["conditions"]
    assert (failed["type"], failed["status"], failed["reason"]) == ("Failed", "True", "ProgressStalled")
    assert failed["lastTransitionTime"] and failed["message"].startswith("no progress report for 75s")
    assert (got["goodput"]["phase"], got["completionTime"]) == ("Finished", rfc3339(at(175)))
    assert jobset_deletes(client) == [("delete", c.JOBSET_KIND, "test-job", "Background", "jobset-uid")]
    assert op.sample("trainjob_operator_goodput_ratio_count") == 1


def test_a_trainjob_that_never_reported_is_never_stalled() -> None:
    client = api(training_job("Fail", reported=None), jobset())
    op = Operator(client, 100_000)
    assert op.reconcile(100_000) is None
    assert [call for call in client.calls if call[0] in ("patch", "delete", "create")] == []


def test_training_that_begins_in_this_pass_comes_back_when_its_first_limit_passes() -> None:
    job = (
        TrainJobBuilder.make()
        .set("metadata.creationTimestamp", rfc3339(at(-30)))
        .set("spec.stallPolicy", {"progressTimeoutSeconds": 60, "firstProgressTimeoutSeconds": 300})
    )
    client = api(job, jobset())
    op = Operator(client, 0)
    assert op.reconcile(0) == 300.0
    got = status(client)
    assert (got["state"], got["goodput"]["phase"], got["goodput"]["startingSeconds"]) == ("Running", "Training", 30)


def test_the_accounting_adds_no_write_to_a_new_pending_trainjob() -> None:
    job = TrainJobBuilder.make().set("metadata.creationTimestamp", rfc3339(at(-5)))
    client = api(job, jobset())
    op = Operator(client, 0)
    assert op.reconciler.store.pods is not None
    op.reconciler.store.pods = PodCache()
    op.reconciler.store.pods.put(PodBuilder.make().raw())  # Pending
    op.reconcile(0)
    op.reconcile(3)
    assert [call for call in client.calls if call[:2] == ("patch", c.TRAINJOB_KIND)] == []
