"""What a TrainJob's pods say (issue 27): STATE and its reason, RESTARTS as soon as a pod fails, and the Warning
Events naming the pod. Pure: the TrainJob's status (conditions already computed), its JobSet and its pods come in
as arguments; the shell caches the pods (`pod_summary`) and sends the events.

The conditions stay upstream's (the kubeflow SDK reports `Running` only while a TrainJob carries no condition,
docs/compatibility.md D18): what upstream lacks goes to `status.state`, `status.reason`, `status.message` and
`status.restartCounts`, which the SDK ignores."""

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..api import constants as c
from ..api.trainjob import RestartCounts, TrainJob, TrainJobStatus
from .conditions import find, is_true
from .errors import printable
from .info import RuntimeInfo
from .lifecycle import stuck_reason, total_restarts

POD_LABELS = (
    c.JOBSET_NAME_LABEL,
    c.JOBSET_UID_LABEL,
    c.JOBSET_RESTART_ATTEMPT_LABEL,
    c.JOBSET_REPLICATED_JOB_LABEL,
    c.JOB_NAME_LABEL,
    c.JOB_COMPLETION_INDEX_LABEL,
)
"""The pod labels the decisions read (all a cached pod keeps of its labels)."""
TEXT_LIMIT = 300
"""Characters kept of a scheduler's or a container's message."""
MESSAGE_LIMIT = 1024
"""`status.message` (the CRD's bound)."""
EVENT_KEYS_PER_TRAINJOB = 16
"""Distinct Warning Events a TrainJob gets at most from one operator process (a crash loop gives one)."""


def _clip(text: Any, limit: int = TEXT_LIMIT) -> str:
    value = str(text or "")
    return value if len(value) <= limit else value[: limit - 3] + "..."


def _status_message(text: Any) -> str:
    """`status.message`: escaped (it quotes the kubelet's text, which quotes the user's; `kubectl describe` prints it
    as it is) before it is cut, so the escapes never take it past the CRD's bound."""
    return _clip(printable(str(text or "")), MESSAGE_LIMIT)


# --- what the operator keeps of a pod -------------------------------------------------------------------------------


def _container_summary(status: dict[str, Any]) -> dict[str, Any]:
    def state(value: dict[str, Any] | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kind, data in (value or {}).items():
            if kind in ("waiting", "terminated") and isinstance(data, dict):
                kept = {k: data[k] for k in ("reason", "exitCode") if k in data}
                # The kubelet's message of a waiting container (an image pull); never a terminated one's, which is
                # what the container wrote to its termination log.
                if kind == "waiting" and data.get("message"):
                    kept["message"] = _clip(data["message"])
                out[kind] = kept
            elif kind == "running":
                out[kind] = {}
        return out

    return {
        "name": status.get("name"),
        "restartCount": int(status.get("restartCount") or 0),
        "ready": bool(status.get("ready")),
        "state": state(status.get("state")),
        "lastState": state(status.get("lastState")),
    }


def pod_summary(pod: dict[str, Any]) -> dict[str, Any]:
    """What the operator keeps of a pod: identity, the few labels above, phase, scheduling and container states
    (messages clipped). A few hundred bytes per pod whatever the pod's spec."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    labels = meta.get("labels") or {}
    kept_meta: dict[str, Any] = {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "labels": {k: labels[k] for k in POD_LABELS if k in labels},
    }
    if meta.get("deletionTimestamp"):
        kept_meta["deletionTimestamp"] = meta["deletionTimestamp"]
    kept_status: dict[str, Any] = {"phase": status.get("phase")}
    if status.get("reason"):
        kept_status["reason"] = status["reason"]
    scheduled = [
        {k: _clip(v) if k == "message" else v for k, v in cond.items() if k in ("type", "status", "reason", "message")}
        for cond in status.get("conditions") or []
        if cond.get("type") == "PodScheduled"
    ]
    if scheduled:
        kept_status["conditions"] = scheduled
    for key in ("initContainerStatuses", "containerStatuses"):
        if status.get(key):
            kept_status[key] = [_container_summary(s) for s in status[key]]
    return {"metadata": kept_meta, "status": kept_status}


# --- the pods of the JobSet's current attempt ----------------------------------------------------------------------


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    return ((pod.get("metadata") or {}).get("labels")) or {}


def _name(pod: dict[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def current_pods(pods: Iterable[dict[str, Any]], jobset: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The pods of this JobSet (by uid, when the pod says) and of its current restart attempt, not being deleted,
    by name."""
    if jobset is None:
        return []
    meta = jobset.get("metadata") or {}
    uid = meta.get("uid")
    attempt = str(int((jobset.get("status") or {}).get("restarts") or 0))
    kept = []
    for pod in pods:
        labels = _labels(pod)
        if labels.get(c.JOBSET_NAME_LABEL) != meta.get("name"):
            continue
        if uid and labels.get(c.JOBSET_UID_LABEL, uid) != uid:
            continue
        if labels.get(c.JOBSET_RESTART_ATTEMPT_LABEL, attempt) != attempt:
            continue
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        kept.append(pod)
    return sorted(kept, key=_name)


@dataclass(frozen=True)
class PodFailure:
    """A container of a pod that exited with an error (or a pod that failed without one)."""

    pod: str
    replicated_job: str
    container: str | None
    exit_code: int | None
    reason: str
    """The kubelet's: `Error`, `OOMKilled`, `CrashLoopBackOff` (waiting to restart), a failed pod's reason."""
    restarts: int
    failing_now: bool
    """Not running again yet (terminated, or waiting in back-off)."""

    def describe(self) -> str:
        what = f"container {self.container}" if self.container else "pod"
        code = f" exited with code {self.exit_code}" if self.exit_code is not None else " failed"
        again = f", restarted {self.restarts} time{'s' if self.restarts != 1 else ''}" if self.restarts else ""
        return f"pod {self.pod}: {what}{code} ({self.reason}){again}"


def pod_failures(pod: dict[str, Any]) -> list[PodFailure]:
    """The failures a pod shows now: each container whose current or last run ended with a non-zero exit code, or the
    pod itself when it failed without a container saying why (evicted, deadline)."""
    status = pod.get("status") or {}
    name, rjob = _name(pod), _labels(pod).get(c.JOBSET_REPLICATED_JOB_LABEL, "")
    found = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for container in status.get(key) or []:
            state, last = container.get("state") or {}, container.get("lastState") or {}
            restarts = int(container.get("restartCount") or 0)
            terminated = state.get("terminated") or {}
            waiting = state.get("waiting") or {}
            ended = last.get("terminated") or {}
            if terminated and terminated.get("exitCode"):
                found.append(
                    PodFailure(
                        name,
                        rjob,
                        container.get("name"),
                        int(terminated["exitCode"]),
                        str(terminated.get("reason") or "Error"),
                        restarts,
                        True,
                    )
                )
            elif ended and ended.get("exitCode"):
                back_off = waiting.get("reason") == c.REASON_CRASH_LOOP
                found.append(
                    PodFailure(
                        name,
                        rjob,
                        container.get("name"),
                        int(ended["exitCode"]),
                        c.REASON_CRASH_LOOP if back_off else str(ended.get("reason") or "Error"),
                        restarts,
                        back_off or "running" not in state,
                    )
                )
    if not found and status.get("phase") == "Failed":
        found.append(PodFailure(name, rjob, None, None, str(status.get("reason") or "Failed"), 0, True))
    return found


def _slot(pod: dict[str, Any]) -> tuple[str, str]:
    """The place a pod fills: its Job and completion index (a failed pod's replacement takes the same slot)."""
    labels = _labels(pod)
    job = labels.get(c.JOB_NAME_LABEL)
    index = labels.get(c.JOB_COMPLETION_INDEX_LABEL)
    return (job, index or "") if job else (_name(pod), "")


def newest_per_slot(pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    newest: dict[tuple[str, str], dict[str, Any]] = {}
    for pod in pods:
        slot = _slot(pod)
        seen = newest.get(slot)
        stamp = ((pod.get("metadata") or {}).get("creationTimestamp") or "", _name(pod))
        if seen is None or stamp > ((seen.get("metadata") or {}).get("creationTimestamp") or "", _name(seen)):
            newest[slot] = pod
    return sorted(newest.values(), key=_name)


def restarts_of(pods: Sequence[dict[str, Any]]) -> int:
    """The restarts a set of pods shows, as they happen: its containers' restarts, and each failed pod that a newer
    pod replaced. A failed pod nothing replaced ended its Job: the JobSet's restart (or failure) that follows counts
    it, once."""
    newest = {_name(p) for p in newest_per_slot(pods)}
    restarts = 0
    for pod in pods:
        status = pod.get("status") or {}
        restarts += sum(
            int(container.get("restartCount") or 0)
            for key in ("initContainerStatuses", "containerStatuses")
            for container in status.get(key) or []
        )
        if status.get("phase") == "Failed" and _name(pod) not in newest:
            restarts += 1
    return restarts


# --- restarts -------------------------------------------------------------------------------------------------------


def jobset_restarts(status: TrainJobStatus | None) -> int:
    """The JobSet restarts recorded in a status (`maxRestarts` budget); an older operator's `restarts` meant only
    those."""
    if status is None:
        return 0
    if status.restart_counts is not None:
        return status.restart_counts.job_set
    return status.restarts or 0


def attempt_of(jobset: dict[str, Any] | None, status: TrainJobStatus) -> str | None:
    """What identifies the set of pods now running: a JobSet restart, a suspend and resume or a rebuilt JobSet
    replace every pod."""
    if jobset is None:
        return None
    uid = (jobset.get("metadata") or {}).get("uid") or ""
    restarts = int((jobset.get("status") or {}).get("restarts") or 0)
    return f"{uid}/{restarts}/{status.start_time or ''}"


def tally_restarts(status: TrainJobStatus, job_set: int | None, attempt: str | None, of_attempt: int | None) -> None:
    """`status.restarts` and `status.restartCounts` from the JobSet restarts so far (None: no JobSet seen) and the
    pod restarts of the current set of pods (`of_attempt`, None when the pods are unknown). Never goes down: the
    failures of pods that are gone stay counted. Reported (0 too) once a JobSet was seen."""
    if job_set is None:
        job_set = jobset_restarts(status)
        if status.restarts is None and not of_attempt:
            return
    before = status.restart_counts or RestartCounts(job_set=jobset_restarts(status))
    seen = before.pods - before.pods_before_attempt
    if of_attempt is None or attempt is None:
        counts = before.model_copy(update={"job_set": max(job_set, before.job_set)})
    elif attempt != before.attempt and (before.attempt is not None or seen):
        counts = RestartCounts(
            job_set=max(job_set, before.job_set),
            pods=before.pods + of_attempt,
            pods_before_attempt=before.pods,
            attempt=attempt,
        )
    else:
        counts = RestartCounts(
            job_set=max(job_set, before.job_set),
            pods=before.pods_before_attempt + max(seen, of_attempt),
            pods_before_attempt=before.pods_before_attempt,
            attempt=attempt,
        )
    total = counts.job_set + counts.pods
    status.restarts = max(total, status.restarts or 0)
    status.restart_counts = counts if counts.pods or status.restart_counts is not None else None


# --- the state ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodWarning:
    """A Warning Event for the TrainJob; `key` is what makes two the same (one event per key)."""

    reason: str
    message: str
    key: str


@dataclass(frozen=True)
class Health:
    state: str
    reason: str | None = None
    message: str | None = None
    warnings: tuple[PodWarning, ...] = ()


def _from_conditions(job: TrainJob, status: TrainJobStatus) -> str | None:
    """The states the conditions and the spec decide on their own."""
    conditions = status.conditions
    for condition, state in (
        (c.CONDITION_FAILED, c.STATE_FAILED),
        (c.CONDITION_COMPLETE, c.STATE_COMPLETE),
        (c.CONDITION_RECONCILE_FAILED, c.STATE_ERROR),
    ):
        if is_true(conditions, condition):
            return state
    return c.STATE_SUSPENDED if job.spec.suspend else None


def _decided(
    job: TrainJob,
    status: TrainJobStatus,
    state: str,
    jobset: dict[str, Any] | None,
    pods: Sequence[dict[str, Any]] | None,
) -> Health:
    """A state the conditions decide: Failed and Error say why with their condition's reason and message (stable:
    a finished TrainJob's status does not change as its pods go). A TrainJob failing in this pass warns about its
    failed pods (the JobSet may have failed before the operator saw them fail); later passes never again."""
    shown = {c.STATE_FAILED: c.CONDITION_FAILED, c.STATE_ERROR: c.CONDITION_RECONCILE_FAILED}.get(state)
    condition = find(status.conditions, shown) if shown else None
    reason = (condition.reason or None) if condition is not None else None
    message = _status_message(condition.message) or None if condition is not None else None
    warnings: tuple[PodWarning, ...] = ()
    was = job.status.state if job.status is not None else None
    if state == c.STATE_FAILED and was != c.STATE_FAILED and pods is not None:
        current = current_pods(pods, jobset)
        warnings = _warnings([], [f for pod in current for f in pod_failures(pod)])
    return Health(state, reason, message, warnings)


def _warnings(pods: Sequence[dict[str, Any]], failures: Sequence[PodFailure]) -> tuple[PodWarning, ...]:
    found: dict[str, PodWarning] = {}
    for failure in failures:
        # Not the reason: a crash loop shows first as Error, then as CrashLoopBackOff; one event for both.
        key = f"failed/{failure.replicated_job}/{failure.container}/{failure.exit_code}"
        found.setdefault(key, PodWarning(c.EVENT_POD_FAILED, failure.describe(), key))
    for pod in pods:
        stuck = stuck_reason(pod)
        if stuck is None:
            continue
        rjob = _labels(pod).get(c.JOBSET_REPLICATED_JOB_LABEL, "")
        if stuck.reason == c.REASON_UNSCHEDULABLE:
            key = f"unschedulable/{rjob}"
            message = f"pod {stuck.name} cannot be scheduled: {stuck.message}"
            found.setdefault(key, PodWarning(c.EVENT_POD_UNSCHEDULABLE, message, key))
        else:
            key = f"cannot-start/{rjob}/{stuck.reason}"
            message = f"pod {stuck.name} cannot start ({stuck.reason}): {stuck.message}"
            found.setdefault(key, PodWarning(c.EVENT_POD_CANNOT_START, message, key))
    return tuple(found.values())


def assess(
    job: TrainJob, status: TrainJobStatus, jobset: dict[str, Any] | None, pods: Sequence[dict[str, Any]] | None
) -> Health:
    """STATE, its reason and the Warning Events, from the conditions first, then the pods of the JobSet's current
    attempt (`pods` None: not known, the JobSet's Job counts decide as before):

    - Unschedulable or unable to pull its image (the newest pod of a place): `Pending`, with the scheduler's or the
      kubelet's reason and message;
    - a container exited with an error and is not running again, or a failed pod's place is not running again:
      `Restarting` (`CrashLoopBackOff` or `PodFailed`), naming the pod and the exit code;
    - a pod running: `Running`; otherwise `Pending`."""
    decided = _from_conditions(job, status)
    if decided is not None:
        return _decided(job, status, decided, jobset, pods)
    if pods is None:
        active = any(j.active > 0 for j in status.jobs_status or [])
        return Health(c.STATE_RUNNING if active else c.STATE_PENDING)
    current = current_pods(pods, jobset)
    newest = newest_per_slot(current)
    failures = [f for pod in current for f in pod_failures(pod)]
    warnings = _warnings(newest, failures)
    for pod in newest:
        stuck = stuck_reason(pod)
        if stuck is not None:
            return Health(
                c.STATE_PENDING, stuck.reason, _status_message(f"pod {stuck.name}: {stuck.message}"), warnings
            )
    for pod in newest:
        now = [f for f in pod_failures(pod) if f.failing_now]
        if now:
            reason = c.REASON_CRASH_LOOP if any(f.reason == c.REASON_CRASH_LOOP for f in now) else c.REASON_POD_FAILED
            return Health(c.STATE_RESTARTING, reason, _status_message(now[0].describe()), warnings)
    running = [p for p in newest if (p.get("status") or {}).get("phase") == "Running"]
    by_slot: dict[tuple[str, str], list[dict[str, Any]]] = {}  # in `current`'s order: one pass, not one per pod
    for pod in current:
        by_slot.setdefault(_slot(pod), []).append(pod)
    for pod in newest:
        if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded"):
            continue
        earlier = [f for q in by_slot.get(_slot(pod), ()) if q is not pod for f in pod_failures(q)]
        if earlier:  # a failed pod's replacement has not started yet
            return Health(c.STATE_RESTARTING, c.REASON_POD_FAILED, _status_message(earlier[-1].describe()), warnings)
    done = bool(newest) and all((p.get("status") or {}).get("phase") == "Succeeded" for p in newest)
    if running or done:  # every pod done: running until the JobSet says Completed
        return Health(c.STATE_RUNNING, warnings=warnings)
    return Health(c.STATE_PENDING, warnings=warnings)


def apply_health(
    job: TrainJob, status: TrainJobStatus, jobset: dict[str, Any] | None, pods: Sequence[dict[str, Any]] | None
) -> Health:
    """Write the state, its reason and the restart counts into `status`; the Health says which events to send."""
    health = assess(job, status, jobset, pods)
    status.state = health.state  # type: ignore[assignment]
    status.reason = health.reason
    status.message = health.message
    counted = current_pods(pods, jobset) if pods is not None else None
    tally_restarts(
        status,
        total_restarts(jobset_restarts(status), jobset) if jobset is not None else None,
        attempt_of(jobset, status),
        restarts_of(counted) if counted is not None and jobset is not None else None,
    )
    return health


# --- nodes and events ---------------------------------------------------------------------------------------------


def requested_nodes(info: RuntimeInfo) -> int | None:
    """NODES as the TrainJob asks for them: the MPI hostfile's hosts (the `node` pods, and the launcher when it runs
    as a node), else the trainer's pod count."""
    policy = info.ml_policy.mpi if info.ml_policy is not None else None
    node_set = info.pod_set(c.NODE)
    if policy is not None and node_set is not None:
        launcher = info.pod_set(c.LAUNCHER) if policy.run_launcher_as_node else None
        return node_set.count + (launcher.count if launcher is not None else 0)
    trainer = info.ancestor(c.ANCESTOR_TRAINER)
    return trainer.count if trainer is not None else None


def trainjob_event(
    job: TrainJob, name: dict[str, str], reason: str, message: str, action: str, stamp: str, type_: str = "Warning"
) -> dict[str, Any]:
    """An Event (a Warning unless `type_` says otherwise) about the TrainJob (its uid: a new TrainJob of the same name is another object); `name` is
    `{"name": ...}` or `{"generateName": ...}`. The message is `printable`: it quotes pod and scheduler text, and
    `kubectl describe` prints it to a terminal as it is."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {**name, "namespace": job.namespace},
        "involvedObject": {
            "apiVersion": c.API_VERSION,
            "kind": c.TRAINJOB_KIND,
            "name": job.name,
            "namespace": job.namespace,
            "uid": job.metadata.uid,
        },
        "reason": reason,
        "message": printable(message),
        "type": type_,
        "action": action,
        "reportingComponent": "trainer-trainjob-controller",
        "reportingInstance": "trainjob-operator",
        "source": {"component": "trainer-trainjob-controller"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def warning_event(job: TrainJob, warning: PodWarning, now: str) -> dict[str, Any]:
    """The Event for one warning, named after the TrainJob's uid and the warning's key: creating it twice conflicts,
    so a crash loop (or an operator restart) records it once."""
    digest = hashlib.blake2b(f"{job.metadata.uid}/{warning.key}".encode(), digest_size=8).hexdigest()
    name = {"name": f"{job.name}.{digest}"}
    return trainjob_event(job, name, warning.reason, _status_message(warning.message), "Watching", now)
