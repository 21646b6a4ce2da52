"""What the UI shows (trainjob_operator.ui.view), as pure functions of API objects."""

from typing import Any

import pytest

from trainjob_operator.ui import view


def tj(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "llm", "namespace": "team", "uid": "u1", "creationTimestamp": "2026-11-23T10:00:00Z"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
        "status": status or {},
    }


@pytest.mark.parametrize(
    ("trainjob", "want"),
    [
        pytest.param(tj({"state": "Error"}), "Error", id="the operator's status.state wins"),
        pytest.param(tj({"conditions": [{"type": "Failed", "status": "True"}]}), "Failed", id="Failed condition"),
        pytest.param(tj({"conditions": [{"type": "Complete", "status": "True"}]}), "Complete", id="Complete condition"),
        pytest.param(tj({"conditions": [{"type": "Failed", "status": "False"}]}), "Pending", id="a False condition"),
        pytest.param(tj(suspend=True), "Suspended", id="suspended"),
        pytest.param(
            tj({"conditions": [{"type": "Suspended", "status": "True"}]}, suspend=False),
            "Suspended",
            id="a MultiKueue manager's copy: suspended on the worker, not on the manager",
        ),
        pytest.param(
            tj(
                {
                    "conditions": [{"type": "Suspended", "status": "False"}],
                    "jobsStatus": [{"name": "node", "active": 1}],
                }
            ),
            "Running",
            id="a MultiKueue manager's copy from an upstream worker: resumed and running",
        ),
        pytest.param(tj({"jobsStatus": [{"name": "node", "active": 2}]}), "Running", id="active jobs run"),
        pytest.param(tj(), "Pending", id="nothing yet"),
    ],
)
def test_derived_state(trainjob: dict[str, Any], want: str) -> None:
    assert view.derived_state(trainjob) == want


def test_trainjob_row() -> None:
    job = tj(
        {
            "state": "Running",
            "nodes": 4,
            "trainerStatus": {
                "progressPercentage": 42,
                "estimatedRemainingSeconds": 120,
                "metrics": [{"name": "loss", "value": "0.2"}],
                "lastUpdatedTime": "2026-11-23T10:05:00Z",
            },
        }
    )
    assert view.trainjob_row(job, {"status": {"restarts": 2}}) == {
        "namespace": "team",
        "name": "llm",
        "uid": "u1",
        "state": "Running",
        "reason": None,
        "message": None,
        "nodes": 4,
        "restarts": 2,
        "progress": 42,
        "remainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.2"}],
        "lastUpdated": "2026-11-23T10:05:00Z",
        "created": "2026-11-23T10:00:00Z",
        "runtime": "ClusterTrainingRuntime/torch-distributed",
        "suspended": False,
    }
    assert view.trainjob_row(tj(trainer={"numNodes": 3}), None)["nodes"] == 3, "spec nodes before the status has any"
    crashing = tj({"state": "Restarting", "reason": "PodFailed", "message": "pod llm-node-0-0-x: ...", "restarts": 5})
    row = view.trainjob_row(crashing, {"status": {"restarts": 1}})
    assert (row["state"], row["reason"], row["restarts"]) == ("Restarting", "PodFailed", 5), (
        "RESTARTS as kubectl shows it (the operator's status), not the JobSet's alone"
    )


def test_an_elastic_trainjobs_row_has_its_current_and_desired_size() -> None:
    elastic = {"currentNodes": 1, "desiredNodes": 2, "minNodes": 1, "maxNodes": 2, "resizes": 3, "jobsetUid": "j"}
    row = view.trainjob_row(tj({"state": "Running", "nodes": 2, "elastic": elastic}), None)
    assert row["elastic"] == {
        "currentNodes": 1,
        "desiredNodes": 2,
        "minNodes": 1,
        "maxNodes": 2,
        "resizes": 3,
        "scaling": None,
        "message": None,
    }
    assert "elastic" not in view.trainjob_row(tj({"state": "Running"}), None)


def event(kind: str, name: str, when: str, reason: str = "Created") -> dict[str, Any]:
    return {
        "involvedObject": {"kind": kind, "name": name},
        "reason": reason,
        "message": "m",
        "type": "Normal",
        "lastTimestamp": when,
    }


def test_events_of_the_trainjob_its_children_and_pods_only() -> None:
    events = [
        event("Pod", "llm-node-0-0-x", "3"),
        event("TrainJob", "llm", "1"),
        event("Job", "llm-node-0", "2"),
        event("JobSet", "llm", "0"),
        event("Pod", "other-node-0-0-y", "4"),
        event("TrainJob", "llm2", "5"),
        event("Secret", "llm-mpi-ssh-auth", "6"),
    ]
    assert [e["object"] for e in view.events_of(events, "llm", ["llm-node-0-0-x"])] == [
        "JobSet/llm",
        "TrainJob/llm",
        "Job/llm-node-0",
        "Pod/llm-node-0-0-x",
    ]


def test_a_failed_trainjobs_gone_pods_keep_their_warnings() -> None:
    events = [
        event("Pod", "llm-node-0-0-abcde", "1", "FailedScheduling"),
        event("Pod", "llm-launcher-0-0-fghij", "2", "FailedScheduling"),
        event("Pod", "llm-x-node-0-0-abcde", "3", "FailedScheduling"),
        event("Pod", "llm-node-0-0-abcde-extra", "4"),
    ]
    failed = tj({"state": "Failed", "jobsStatus": [{"name": "node"}]})
    rjobs = view.replicated_job_names(failed, None)
    assert [e["object"] for e in view.events_of(events, "llm", [], rjobs)] == ["Pod/llm-node-0-0-abcde"], (
        "only names JobSet gives the TrainJob's own replicated jobs' pods (not TrainJob llm-x's)"
    )
    assert view.replicated_job_names(failed, {"status": {"replicatedJobsStatus": [{"name": "launcher"}]}}) == [
        "launcher",
        "node",
    ]


@pytest.mark.parametrize(
    ("trainjob", "jobset", "want"),
    [
        pytest.param(
            tj({"state": "Failed"}), None, "No JobSet: the TrainJob is Failed and its JobSet was deleted.", id="failed"
        ),
        pytest.param(tj({"state": "Pending"}), None, "No JobSet yet: the operator has not built it.", id="new"),
        pytest.param(
            tj(suspend=True), None, "No JobSet: the TrainJob is suspended and was never started.", id="suspended"
        ),
        pytest.param(
            tj({"state": "Error"}), None, "No JobSet: the operator could not build it (see the conditions).", id="error"
        ),
        pytest.param(tj({"state": "Running"}), {"status": {}}, None, id="a JobSet: nothing to say"),
    ],
)
def test_what_is_said_where_there_is_no_jobset(
    trainjob: dict[str, Any], jobset: dict[str, Any] | None, want: str | None
) -> None:
    assert view.jobset_note(trainjob, jobset) == want


def test_replicated_jobs_count_pods_where_pods_are_meant() -> None:
    jobset = {
        "status": {
            "replicatedJobsStatus": [{"name": "node", "active": 1, "ready": 1}, {"name": "launcher", "succeeded": 1}]
        }
    }
    pods = [
        {"replicatedJob": "node", "phase": "Running", "ready": 1, "containers": ["node"]},
        {"replicatedJob": "node", "phase": "Running", "ready": 0, "containers": ["node"]},
        {"replicatedJob": "node", "phase": "Pending", "ready": 0, "containers": ["node"]},
        {"replicatedJob": "launcher", "phase": "Succeeded", "ready": 0, "containers": ["node"]},
    ]
    assert view.replicated_jobs(jobset, pods) == [
        {
            "name": "node",
            "jobsActive": 1,
            "jobsSucceeded": 0,
            "jobsFailed": 0,
            "pods": 3,
            "podsPending": 1,
            "podsRunning": 2,
            "podsReady": 1,
            "podsSucceeded": 0,
            "podsFailed": 0,
        },
        {
            "name": "launcher",
            "jobsActive": 0,
            "jobsSucceeded": 1,
            "jobsFailed": 0,
            "pods": 1,
            "podsPending": 0,
            "podsRunning": 0,
            "podsReady": 0,
            "podsSucceeded": 1,
            "podsFailed": 0,
        },
    ]


def test_shown_objects_drop_bookkeeping() -> None:
    obj = {
        "metadata": {
            "name": "x",
            "managedFields": [{}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "1"},
        },
        "spec": {},
    }
    assert view.shown(obj) == {"metadata": {"name": "x", "annotations": {"keep": "1"}}, "spec": {}}


def test_history_keeps_one_point_per_report_bounded() -> None:
    history = view.History(limit=2)
    row = view.trainjob_row(
        tj(
            {
                "trainerStatus": {
                    "progressPercentage": 1,
                    "lastUpdatedTime": "t1",
                    "metrics": [
                        {"name": "loss", "value": "0.5"},
                        {"name": "phase", "value": "warmup"},
                        {"name": "bad", "value": "nan"},
                    ],
                }
            }
        ),
        None,
    )
    assert history.record(row) and not history.record(row), "the same report is one point"
    assert history.of("u1") == [{"time": "t1", "progress": 1, "metrics": {"loss": 0.5}}], "numeric values only"
    for stamp in ("t2", "t3"):
        history.record({**row, "lastUpdated": stamp})
    assert [p["time"] for p in history.of("u1")] == ["t2", "t3"]
    assert not history.record({**row, "lastUpdated": None}), "nothing reported, nothing recorded"
    history.forget("u1")
    assert history.of("u1") == []


def test_pods_sorted_by_job_and_index() -> None:
    def pod(name: str, job: str, index: str) -> dict[str, Any]:
        return {
            "metadata": {
                "name": name,
                "labels": {
                    "jobset.sigs.k8s.io/replicatedjob-name": job,
                    "batch.kubernetes.io/job-completion-index": index,
                },
            },
            "spec": {"containers": [{"name": "node"}], "nodeName": "n"},
            "status": {"phase": "Running", "containerStatuses": [{"ready": True, "restartCount": 2}]},
        }

    rows = view.pods_of([pod("b", "node", "1"), pod("a", "node", "0"), pod("i", "dataset-initializer", "0")])
    assert [r["name"] for r in rows] == ["i", "a", "b"]
    assert rows[1] == {
        "name": "a",
        "phase": "Running",
        "node": "n",
        "replicatedJob": "node",
        "index": "0",
        "restarts": 2,
        "ready": 1,
        "containers": ["node"],
        "created": None,
    }
