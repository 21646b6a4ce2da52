"""The reconciler executes the elastic decision (runtime/elastic.py) for a running elastic TrainJob: the JobSet's
resize as a JSON patch bound to its uid, one Event per resize, `status.elastic`; a JobSet that refuses the resize
(its ElasticJobSet gate off) leaves the TrainJob fixed-size, said once; below minNodes too long, Failed and the
JobSet deleted. An in-memory client stands in for the API server; the clock is fixed."""

import asyncio
import datetime as dt
import json
from typing import Any

from builders import PodBuilder, RuntimeBuilder, TrainJobBuilder
from fake_client import FakeClient
from trainjob_operator.api import constants as c
from trainjob_operator.controller.reconciler import Reconciler
from trainjob_operator.controller.store import PodCache, Store
from trainjob_operator.k8s.client import ApiError
from trainjob_operator.metrics import Metrics
from trainjob_operator.runtime.pipeline import Framework

NOW = dt.datetime(2026, 11, 28, 12, 0, 0, tzinfo=dt.UTC)
KEY = ("default", "test-job")
OWNED = [
    {
        "apiVersion": c.API_VERSION,
        "kind": c.TRAINJOB_KIND,
        "name": "test-job",
        "uid": "uid",
        "controller": True,
        "blockOwnerDeletion": True,
    }
]


def jobset(size: int, low: int = 1, below: int = 600) -> dict[str, Any]:
    return {
        "apiVersion": c.JOBSET_API_VERSION,
        "kind": c.JOBSET_KIND,
        "metadata": {
            "name": "test-job",
            "namespace": "default",
            "uid": "jobset-uid",
            "resourceVersion": "5",
            "ownerReferences": OWNED,
            "annotations": {
                c.ELASTIC_ANNOTATION: json.dumps({"minNodes": low, "maxNodes": 2, "belowMinNodesSeconds": below})
            },
        },
        "spec": {
            "suspend": False,
            "replicatedJobs": [{"name": c.NODE, "template": {"spec": {"parallelism": size, "completions": size}}}],
        },
        "status": {"restarts": 0},
    }


def reconciler(client: FakeClient, job: TrainJobBuilder, js: dict[str, Any], pods: list[dict[str, Any]]) -> Reconciler:
    store = Store()
    store.trainjobs.put(job.raw())
    client.put(job.raw(), js)
    store.runtimes.put(RuntimeBuilder.make().ml_policy(num_nodes=2, torch={"elasticPolicy": {}}).raw())
    store.jobsets.put(js)
    store.pods = PodCache()
    for pod in pods:
        store.pods.put(pod)
    return Reconciler(client, store, Framework.from_registry(), Metrics(), clock=lambda: NOW)


JOB = TrainJobBuilder.make().trainer(numNodes=2).set("metadata.creationTimestamp", "2026-11-28T11:00:00Z")
SEEN = {"jobsetUid": "jobset-uid", "currentNodes": 2, "desiredNodes": 2, "minNodes": 1, "maxNodes": 2}
LOST = [
    PodBuilder.make(index=0).running().raw(),
    PodBuilder.make(index=1, suffix="new").unschedulable("0/2 nodes are available").raw(),
]


def stored(client: FakeClient, kind: str) -> dict[str, Any]:
    api = c.JOBSET_API_VERSION if kind == c.JOBSET_KIND else c.API_VERSION
    obj = client.stored(api, kind, "test-job", "default")
    assert obj is not None
    return obj


def events(client: FakeClient) -> list[dict[str, Any]]:
    """The elastic Events (the pods' own Warnings, PodUnschedulable, are health's)."""
    return [o for (_, kind, _, _), o in client.objects.items() if kind == "Event" and o["reason"].startswith("Elastic")]


def test_a_lost_pod_shrinks_the_jobset_with_a_normal_event_and_the_status_says_so() -> None:
    client = FakeClient()
    rec = reconciler(client, JOB.set("status", {"elastic": SEEN}), jobset(2), LOST)
    asyncio.run(rec.reconcile(KEY))
    rjob = stored(client, c.JOBSET_KIND)["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (rjob["parallelism"], rjob["completions"]) == (1, 1)
    (event,) = events(client)
    assert (event["type"], event["reason"]) == ("Normal", c.EVENT_ELASTIC_SCALE_DOWN)
    assert event["message"].startswith("scaled down from 2 to 1 node(s): pod test-job-node-0-1-new cannot be placed")
    elastic = stored(client, c.TRAINJOB_KIND)["status"]["elastic"]
    assert (elastic["currentNodes"], elastic["desiredNodes"], elastic["resizes"]) == (1, 1, 1)


def test_a_jobset_that_refuses_the_resize_leaves_the_trainjob_fixed_size_and_says_so_once() -> None:
    client = FakeClient().fail(
        "patch",
        ApiError(
            422, "Invalid", 'JobSet.jobset.x-k8s.io "test-job" is invalid: spec.replicatedJobs: field is immutable'
        ),
        kind=c.JOBSET_KIND,
    )
    rec = reconciler(client, JOB.set("status", {"elastic": SEEN}), jobset(2), LOST)
    asyncio.run(rec.reconcile(KEY))
    rjob = stored(client, c.JOBSET_KIND)["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert rjob["parallelism"] == 2
    elastic = stored(client, c.TRAINJOB_KIND)["status"]["elastic"]
    assert (elastic["scaling"], elastic["desiredNodes"], elastic["resizes"]) == ("Unavailable", 2, 0)
    assert "ElasticJobSet feature gate" in elastic["message"]
    (event,) = events(client)
    assert (event["type"], event["reason"]) == ("Warning", c.EVENT_ELASTIC_UNAVAILABLE)

    # The next pass (the status written) tries no resize and sends no Event.
    rec.store.trainjobs.put(stored(client, c.TRAINJOB_KIND))
    asyncio.run(rec.reconcile(KEY))
    assert len(events(client)) == 1
    assert len([call for call in client.calls if call[:2] == ("patch", c.JOBSET_KIND)]) == 1


def test_below_min_nodes_too_long_fails_the_trainjob_and_deletes_its_jobset() -> None:
    client = FakeClient()
    previous = {**SEEN, "currentNodes": 1, "belowMinNodesSince": "2026-11-28T11:58:00Z"}
    rec = reconciler(client, JOB.set("status", {"elastic": previous}), jobset(2, low=2, below=60), LOST)
    asyncio.run(rec.reconcile(KEY))
    status = stored(client, c.TRAINJOB_KIND)["status"]
    failed = next(cond for cond in status["conditions"] if cond["type"] == c.CONDITION_FAILED)
    assert (failed["status"], failed["reason"]) == ("True", c.REASON_BELOW_MIN_NODES)
    assert client.stored(c.JOBSET_API_VERSION, c.JOBSET_KIND, "test-job", "default") is None
    assert [call for call in client.calls if call[0] == "delete"] == [
        ("delete", c.JOBSET_KIND, "test-job", "Background", "jobset-uid")
    ]


def test_a_trainjob_that_is_not_elastic_is_never_patched() -> None:
    client = FakeClient()
    plain = jobset(2)
    del plain["metadata"]["annotations"]
    rec = reconciler(client, JOB, plain, LOST)
    asyncio.run(rec.reconcile(KEY))
    assert [call for call in client.calls if call[:2] == ("patch", c.JOBSET_KIND)] == []
    assert "elastic" not in (stored(client, c.TRAINJOB_KIND).get("status") or {})


def test_a_lost_rendezvous_host_moves_the_service_to_a_survivor_once() -> None:
    client = FakeClient()
    evicted = PodBuilder.make(index=0).running().raw()
    evicted["metadata"]["deletionTimestamp"] = "2026-11-28T11:59:50Z"
    pods = [evicted, PodBuilder.make(index=1).running().raw()]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "test-job-rdzv", "namespace": "default", "ownerReferences": OWNED},
        "spec": {"selector": {c.JOB_COMPLETION_INDEX_LABEL: "0"}},
    }
    rec = reconciler(client, JOB.set("status", {"elastic": SEEN}), jobset(2), pods)
    client.put(service)
    asyncio.run(rec.reconcile(KEY))
    # No shrink (it would drop index 1, the survivor); the Service deleted, the status names index 1, one Event.
    assert [call for call in client.calls if call[:2] == ("patch", c.JOBSET_KIND)] == []
    made = client.stored("v1", "Service", "test-job-rdzv", "default")
    assert made is not None and made["spec"]["selector"][c.JOB_COMPLETION_INDEX_LABEL] == "1"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "uid"
    elastic = stored(client, c.TRAINJOB_KIND)["status"]["elastic"]
    assert (elastic["rendezvousIndex"], elastic["desiredNodes"], elastic["resizes"]) == (1, 2, 0)
    (event,) = events(client)
    assert (event["reason"], event["type"]) == (c.EVENT_ELASTIC_RENDEZVOUS_MOVED, "Normal")
    assert event["message"].startswith("the rendezvous moved from index 0 to index 1")

    assert [call[:3] for call in client.calls if call[1] == "Service"] == [
        ("get", "Service", "test-job-rdzv"),
        ("delete", "Service", "test-job-rdzv"),
        ("create", "Service", "test-job-rdzv"),
    ]

    rec.store.trainjobs.put(stored(client, c.TRAINJOB_KIND))
    asyncio.run(rec.reconcile(KEY))
    assert len(events(client)) == 1  # moved once


def test_a_service_of_that_name_that_is_not_the_trainjobs_is_never_deleted() -> None:
    client = FakeClient()
    evicted = PodBuilder.make(index=0).running().raw()
    evicted["metadata"]["deletionTimestamp"] = "2026-11-28T11:59:50Z"
    rec = reconciler(
        client, JOB.set("status", {"elastic": SEEN}), jobset(2), [evicted, PodBuilder.make(index=1).running().raw()]
    )
    client.put({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "test-job-rdzv", "namespace": "default"}})
    asyncio.run(rec.reconcile(KEY))
    assert [call[0] for call in client.calls if call[1] == "Service"] == ["get"]
    assert stored(client, c.TRAINJOB_KIND)["status"]["elastic"]["rendezvousIndex"] == 0
    assert events(client) == []
