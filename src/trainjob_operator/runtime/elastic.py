"""Elastic PyTorch: the size of a running elastic TrainJob's JobSet, decided from what is observed (docs/elastic.md).

The torch plugin builds an elastic TrainJob's JobSet with its bounds in an annotation (`ELASTIC_ANNOTATION`); each
reconcile of the running TrainJob then decides here, from that JobSet, the trainer pods the cache holds, the
TrainJob's numNodes and its last `status.elastic`, whether to resize the trainer job (a JSON patch of its
parallelism and completions: JobSet's ElasticJobSet gate makes them mutable), which Event says so, what
`status.elastic` shows and whether the TrainJob fails for having run below minNodes too long. No state is kept
anywhere else: a restarted operator decides the same from the same objects. No clock: `now` comes in.

The rules, in order:
- a trainer pod succeeded: the training is ending, nothing is decided;
- scaling Unavailable for this JobSet (JobSet refused a resize): nothing is patched; the counts are still shown;
- the rendezvous: the Service selects one index's c10d store (every agent serves one); when what ran at that index
  is gone (its pod being deleted, failed or unplaceable) and another index runs, it moves to the lowest running
  index (`rendezvous`);
- a trainer pod that cannot be placed (Pending, Unschedulable) while the job is above minNodes: shrink to the
  highest running index (at least minNodes). An Indexed Job drops its highest indexes, so a shrink never goes
  below a running index: a lost index under a running one keeps its size, and its pod joins when it is placed;
- numNodes below the current size: shrink to it (a user's edit);
- every pod of the current size running, none unplaceable, the current size below the target (numNodes within
  the bounds, never above what Kueue admitted) and, after a shrink for want of capacity, `GROW_RETRY_SECONDS`
  passed: grow to the target. Growing is a probe: if the capacity is not back, the new pods are unplaceable and
  the next pass shrinks again;
- fewer than minNodes pods running, after the TrainJob had reached minNodes, for longer than the policy's
  belowMinNodesSeconds: Failed (reason BelowMinNodes).
"""

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..api import constants as c
from ..api.trainjob import Condition, ElasticStatus, TrainJob, TrainJobStatus
from .conditions import rfc3339, set_condition
from .errors import printable
from .health import current_pods
from .lifecycle import parse_time
from .manifests import owned_metadata

STALE_SECONDS = 30.0
"""How long after a resize a JobSet of another size is taken for the cache's older copy (only the operator resizes
it): nothing is decided on it, the reconcile looks again shortly."""
GROW_RETRY_SECONDS = 30.0
"""After a shrink for want of capacity, how long before growing back is tried (the operator watches no nodes: a
grow is the probe; a pod that still cannot be placed costs a Pending pod and one more shrink)."""


def rendezvous_service(trainjob: str) -> str:
    """The name of an elastic TrainJob's rendezvous Service (the torch plugin builds it; a move deletes it)."""
    return f"{trainjob}-rdzv"


def rendezvous_manifest(job: TrainJob, index: int) -> dict[str, Any]:
    """The rendezvous Service: headless, selecting the trainer pod of completion index `index`, whose agent's c10d
    store is then the rendezvous (every elastic agent serves one; docs/elastic.md, "The rendezvous")."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": owned_metadata(job, rendezvous_service(job.name)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {
                c.JOBSET_NAME_LABEL: job.name,
                c.JOBSET_REPLICATED_JOB_LABEL: c.NODE,
                c.JOB_COMPLETION_INDEX_LABEL: str(index),
            },
            "ports": [{"name": "c10d", "port": c.TORCH_RDZV_PORT, "targetPort": c.TORCH_RDZV_PORT}],
        },
    }


@dataclass(frozen=True)
class Bounds:
    """What the torch plugin wrote on the JobSet (`ELASTIC_ANNOTATION`)."""

    min_nodes: int
    max_nodes: int
    below_min_seconds: int
    admitted: int | None = None
    """Kueue admitted this many pods: never grow past them."""


def bounds(jobset: dict[str, Any] | None) -> Bounds | None:
    """The bounds an elastic JobSet carries; None for any other JobSet (or an annotation that does not parse: a
    user's edit of it must not crash the reconcile, the JobSet is then left fixed-size)."""
    annotations = ((jobset or {}).get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(c.ELASTIC_ANNOTATION)
    if not isinstance(raw, str) or len(raw) > 1024:
        return None
    try:
        parsed = json.loads(raw)
        low, high = int(parsed["minNodes"]), int(parsed["maxNodes"])
        below = int(parsed.get("belowMinNodesSeconds", c.ELASTIC_DEFAULT_BELOW_MIN_SECONDS))
        admitted = parsed.get("admittedNodes")
        admitted = int(admitted) if admitted is not None else None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if not 1 <= low <= high:
        return None
    return Bounds(low, high, max(below, 1), admitted)


def trainer_job(jobset: dict[str, Any]) -> tuple[int, int] | None:
    """(index in spec.replicatedJobs, parallelism) of the trainer (`node`) replicated job."""
    for i, rjob in enumerate(((jobset.get("spec") or {}).get("replicatedJobs")) or []):
        if isinstance(rjob, dict) and rjob.get("name") == c.NODE:
            spec = ((rjob.get("template") or {}).get("spec")) or {}
            parallelism = spec.get("parallelism")
            return i, int(parallelism) if isinstance(parallelism, int) else 1
    return None


def _index(pod: dict[str, Any]) -> int | None:
    value = (((pod.get("metadata") or {}).get("labels")) or {}).get(c.JOB_COMPLETION_INDEX_LABEL)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _unschedulable(pod: dict[str, Any]) -> str | None:
    """The scheduler's message for a pod it cannot place (None: it is placed, or not judged yet)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Pending":
        return None
    for cond in status.get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            return str(cond.get("message") or "unschedulable")
    return None


@dataclass(frozen=True)
class Census:
    running: int
    """Indexes below the current size with a Running pod that is not being deleted."""
    unplaceable: tuple[tuple[str, str], ...]
    """(pod, scheduler's message) of the trainer pods that cannot be placed."""
    alive: frozenset[int] = frozenset()
    """Those indexes."""
    lost: frozenset[int] = frozenset()
    """Indexes with a pod being deleted, failed, or that cannot be placed, and none alive: what ran there is gone."""
    ending: bool = False
    """A trainer pod succeeded: the training is ending (nothing is resized or moved, no time below minNodes)."""


def _gone(pod: dict[str, Any]) -> bool:
    """Being deleted (an eviction from a lost node, a scale-down) or failed. (A pod that succeeded is the training
    ending: nothing to move for.)"""
    return (
        bool((pod.get("metadata") or {}).get("deletionTimestamp")) or (pod.get("status") or {}).get("phase") == "Failed"
    )


def deleting(pods: list[dict[str, Any]], jobset: dict[str, Any]) -> set[int]:
    """The indexes of this JobSet's trainer pods being deleted (`current_pods` leaves them out)."""
    meta = jobset.get("metadata") or {}
    found: set[int] = set()
    for pod in pods:
        labels = ((pod.get("metadata") or {}).get("labels")) or {}
        if (
            (pod.get("metadata") or {}).get("deletionTimestamp")
            and labels.get(c.JOBSET_NAME_LABEL) == meta.get("name")
            and labels.get(c.JOBSET_UID_LABEL, meta.get("uid")) == meta.get("uid")
            and labels.get(c.JOBSET_REPLICATED_JOB_LABEL) == c.NODE
        ):
            index = _index(pod)
            if index is not None:
                found.add(index)
    return found


def census(pods: list[dict[str, Any]], size: int, ended: set[int] | None = None) -> Census:
    """What runs, from the current pods; `ended`: indexes known gone besides (their pods being deleted)."""
    alive: set[int] = set()
    ended = {i for i in ended or set() if i < size}
    ending = False
    unplaceable: list[tuple[str, str]] = []
    for pod in pods:
        if (((pod.get("metadata") or {}).get("labels")) or {}).get(c.JOBSET_REPLICATED_JOB_LABEL) != c.NODE:
            continue
        index = _index(pod)
        if index is None or index >= size:
            continue
        if (pod.get("status") or {}).get("phase") == "Succeeded":
            ending = True
        if _gone(pod):
            ended.add(index)
        elif (pod.get("status") or {}).get("phase") == "Running":
            alive.add(index)
        message = _unschedulable(pod)
        if message is not None:
            unplaceable.append((str((pod.get("metadata") or {}).get("name") or ""), message))
            ended.add(index)
    return Census(len(alive), tuple(sorted(unplaceable)), frozenset(alive), frozenset(ended - alive), ending)


def rendezvous(current: int, seen: Census) -> int:
    """The index whose store the rendezvous Service selects: kept while its pod runs, or while nothing else runs;
    moved to the lowest running index once what ran there is gone (the Service never moves away from a running
    store: the agents connected to it would split from the ones that resolve the name again)."""
    if current in seen.alive or current not in seen.lost or not seen.alive:
        return current
    return min(seen.alive)


@dataclass(frozen=True)
class Resize:
    before: int
    size: int
    patch: list[dict[str, Any]]
    """The JSON patch of the JobSet: tests its uid and the replicated job's name, replaces parallelism and
    completions (JobSet requires them equal for an elastic Indexed Job)."""
    reason: str
    """The Event's reason: ElasticScaleDown or ElasticScaleUp."""
    message: str


@dataclass(frozen=True)
class ResizeDecision:
    status: ElasticStatus
    """`status.elastic` as it is once the resize (if any) is made."""
    resize: Resize | None = None
    moved: tuple[int, int] | None = None
    """(from, to): the rendezvous Service moves to another index's store (deleted and created again selecting
    `to`, `rendezvous_manifest`), said by an Event."""
    failed: tuple[str, str] | None = None
    """(reason, message): the TrainJob fails (below minNodes too long)."""
    requeue_after: float | None = None
    """Look again then (a grow to retry, the below-minNodes deadline)."""


def _since(value: str | None, now: datetime) -> float | None:
    if not value:
        return None
    try:
        return (now - parse_time(value)).total_seconds()
    except ValueError:
        return None


def _patch(jobset: dict[str, Any], index: int, size: int) -> list[dict[str, Any]]:
    base = f"/spec/replicatedJobs/{index}"
    return [
        {"op": "test", "path": "/metadata/uid", "value": (jobset.get("metadata") or {}).get("uid")},
        {"op": "test", "path": f"{base}/name", "value": c.NODE},
        {"op": "replace", "path": f"{base}/template/spec/parallelism", "value": size},
        {"op": "replace", "path": f"{base}/template/spec/completions", "value": size},
    ]


def target(job: TrainJob, limits: Bounds, size: int) -> int:
    """The size the TrainJob asks for: its numNodes (the JobSet's size when it sets none) within the bounds, never
    above what Kueue admitted."""
    trainer = job.spec.trainer
    wanted = trainer.num_nodes if trainer is not None and trainer.num_nodes is not None else size
    wanted = min(max(wanted, limits.min_nodes), limits.max_nodes)
    if limits.admitted is not None:
        wanted = min(wanted, limits.admitted)
    return wanted


def decide(
    job: TrainJob, jobset: dict[str, Any] | None, pods: list[dict[str, Any]] | None, now: datetime
) -> ResizeDecision | None:
    """The elastic decision of one reconcile of a running TrainJob; None when its JobSet is not elastic, or its pods
    are not known (no pod watch: nothing is resized blind)."""
    limits = bounds(jobset)
    if limits is None or jobset is None or pods is None:
        return None
    found = trainer_job(jobset)
    if found is None:
        return None
    index, size = found
    uid = str((jobset.get("metadata") or {}).get("uid") or "")
    previous = (job.status.elastic if job.status is not None else None) or ElasticStatus()
    if previous.jobset_uid != uid:  # a new JobSet (rebuilt, or the first): its counts start afresh
        previous = ElasticStatus(
            scaling=previous.scaling if previous.jobset_uid is None else "Enabled",
            rendezvous_index=previous.rendezvous_index,  # what the Service still selects
        )
    resized = _since(previous.last_resize_time, now)
    if (
        previous.jobset_uid == uid
        and previous.desired_nodes not in (0, size)
        and resized is not None
        and resized < STALE_SECONDS
    ):
        return ResizeDecision(previous, requeue_after=1.0)  # the resize is not in the cache yet
    seen = census(current_pods(pods, jobset), size, deleting(pods, jobset))
    status = previous.model_copy(
        update={
            "current_nodes": seen.running,
            "desired_nodes": size,
            "min_nodes": limits.min_nodes,
            "max_nodes": limits.max_nodes,
            "jobset_uid": uid,
        }
    )
    requeue: float | None = None

    if seen.ending:  # the pods are completing: their count says nothing of the capacity
        status.below_min_nodes_since = None
        return ResizeDecision(status)
    # Below minNodes: counted only once the TrainJob had reached minNodes (the start-up has its own deadline).
    if seen.running >= limits.min_nodes:
        status.below_min_nodes_since = None
    elif previous.current_nodes >= limits.min_nodes or previous.below_min_nodes_since:
        since = previous.below_min_nodes_since or rfc3339(now)
        status.below_min_nodes_since = since
        waited = _since(since, now) or 0.0
        if waited >= limits.below_min_seconds:
            message = (
                f"{seen.running} trainer pod(s) ran for {int(waited)} s, fewer than elasticPolicy minNodes "
                f"({limits.min_nodes}); belowMinNodesSeconds is {limits.below_min_seconds}"
            )
            return ResizeDecision(status, failed=(c.REASON_BELOW_MIN_NODES, message))
        requeue = limits.below_min_seconds - waited

    moved: tuple[int, int] | None = None
    host = rendezvous(previous.rendezvous_index, seen)
    if host != previous.rendezvous_index:
        moved = (previous.rendezvous_index, host)
        status.rendezvous_index = host

    if status.scaling == "Unavailable":
        return ResizeDecision(status, moved=moved, requeue_after=requeue)

    want = target(job, limits, size)
    resize: Resize | None = None
    # An Indexed Job drops its highest indexes: a shrink never goes below a running index (it would stop a survivor).
    keep = max(limits.min_nodes, max(seen.alive, default=-1) + 1)
    if seen.unplaceable and keep < size:
        pod, why = seen.unplaceable[0]
        resize = Resize(
            size,
            keep,
            _patch(jobset, index, keep),
            c.EVENT_ELASTIC_SCALE_DOWN,
            printable(f"scaled down from {size} to {keep} node(s): pod {pod} cannot be placed: {why}"),
        )
        status.last_shrink_time = rfc3339(now)
    elif size > want:
        resize = Resize(
            size,
            want,
            _patch(jobset, index, want),
            c.EVENT_ELASTIC_SCALE_DOWN,
            f"scaled down from {size} to {want} node(s): numNodes is {want}",
        )
    elif size < want and not seen.unplaceable and seen.running >= size:
        shrunk = _since(previous.last_shrink_time, now)
        if shrunk is not None and shrunk < GROW_RETRY_SECONDS:
            retry = GROW_RETRY_SECONDS - shrunk
            requeue = min(requeue, retry) if requeue is not None else retry
        else:
            resize = Resize(
                size,
                want,
                _patch(jobset, index, want),
                c.EVENT_ELASTIC_SCALE_UP,
                f"scaled up from {size} to {want} node(s) (numNodes {want}, maxNodes {limits.max_nodes})",
            )
    if resize is not None:
        status.desired_nodes = resize.size
        status.resizes = previous.resizes + 1
        status.last_resize_time = rfc3339(now)
        status.message = resize.message
    elif seen.unplaceable and size > limits.min_nodes:
        pod, why = seen.unplaceable[0]
        status.message = printable(
            f"pod {pod} cannot be placed: {why}; the size stays {size}: index {keep - 1} runs above it (an Indexed "
            "Job drops its highest indexes), the pod joins when it can be placed"
        )[:1024]
    return ResizeDecision(status, resize, moved, requeue_after=requeue)


def refused(job: TrainJob, decision: ResizeDecision, message: str) -> ResizeDecision:
    """JobSet refused the resize (its ElasticJobSet feature gate is off: parallelism is immutable): the TrainJob
    runs at the size it has, and says so once (the Event's message is the status' message)."""
    previous = (job.status.elastic if job.status is not None else None) or ElasticStatus()
    status = decision.status.model_copy(
        update={
            "scaling": "Unavailable",
            "desired_nodes": decision.resize.before if decision.resize is not None else decision.status.desired_nodes,
            "resizes": previous.resizes if previous.jobset_uid == decision.status.jobset_uid else 0,
            "last_resize_time": previous.last_resize_time,
            "last_shrink_time": previous.last_shrink_time,
            "message": printable(
                "JobSet refused to resize the trainer job (is its ElasticJobSet feature gate on?); the TrainJob runs "
                f"fixed-size, torchrun continues on the nodes that remain. JobSet said: {message}"
            )[:1024],
        }
    )
    return ResizeDecision(status, None, decision.moved, decision.failed, decision.requeue_after)


def with_elastic(status: TrainJobStatus, decision: ResizeDecision, now: datetime) -> TrainJobStatus:
    """The TrainJob's status with `decision`'s: `status.elastic`, and Failed (BelowMinNodes) when it failed."""
    result = status.model_copy(deep=True)
    result.elastic = decision.status
    if decision.failed is not None:
        conditions = list(result.conditions or [])
        set_condition(
            conditions,
            Condition(type=c.CONDITION_FAILED, status="True", reason=decision.failed[0], message=decision.failed[1]),
            now,
        )
        result.conditions = conditions
        result.completion_time = result.completion_time or rfc3339(now)
    return result
