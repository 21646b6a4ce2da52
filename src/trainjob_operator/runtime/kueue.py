"""Why Kueue stopped a TrainJob: the eviction (or preemption) condition of the Workload Kueue keeps for it, in the
TrainJob's `status.reason` and `status.message` while it is suspended (docs/compatibility.md D29).

Kueue suspends a TrainJob it evicts (preempted by a higher priority, its ClusterQueue stopped, a pods-ready
timeout...) with a typed Update of `spec.suspend` only; the reason is on its Workload (`kueue.x-k8s.io/v1beta2`,
controlled by the TrainJob, labelled with its uid) and in a `Stopped` Event."""

from collections.abc import Mapping, Sequence
from typing import Any

from ..api import constants as c
from ..api.trainjob import TrainJob, TrainJobStatus
from .errors import printable
from .health import MESSAGE_LIMIT, _clip

WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
WORKLOAD_KIND = "Workload"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
#: The Workload's conditions that say why it does not run, the first one True wins.
STOP_CONDITIONS = ("Evicted", "Preempted")
REASON_LIMIT = 64
"""`status.reason` (the CRD's bound)."""


def asks_why(job: TrainJob) -> bool:
    """Whether the Workload is worth reading: the TrainJob is queued in Kueue and suspended after it was admitted
    (its last status showed another state) or with a reason already shown (kept up to date). A TrainJob waiting for
    its first admission has nothing to explain, so the queue of never-admitted TrainJobs costs no reads."""
    if not job.spec.suspend or QUEUE_NAME_LABEL not in (job.metadata.labels or {}) or job.status is None:
        return False
    return job.status.state not in (None, c.STATE_SUSPENDED) or job.status.reason is not None


def workload_selector(job: TrainJob) -> str:
    """The label selector of the Workloads Kueue made for this incarnation of the TrainJob."""
    return f"{JOB_UID_LABEL}={job.metadata.uid or ''}"


def _controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("controller") and ref.get("uid") == uid for ref in refs)


def why_stopped(workloads: Sequence[Mapping[str, Any]], uid: str) -> tuple[str, str] | None:
    """(reason, message) of the first True stop condition of the Workload controlled by the TrainJob `uid` (a
    Workload of another incarnation says nothing of this one); None when Kueue has not stopped it (queued, never
    admitted) or no Workload is known. Escaped and cut to the status fields' bounds."""
    for workload in workloads:
        if not _controlled_by(workload, uid):
            continue
        conditions = {cond.get("type"): cond for cond in (workload.get("status") or {}).get("conditions") or []}
        for kind in STOP_CONDITIONS:
            cond = conditions.get(kind)
            if cond is not None and cond.get("status") == "True":
                reason = _clip(printable(str(cond.get("reason") or kind)), REASON_LIMIT)
                return reason, _clip(printable(str(cond.get("message") or "")), MESSAGE_LIMIT)
    return None


def explain_suspension(status: TrainJobStatus, stopped: tuple[str, str] | None) -> TrainJobStatus:
    """A suspended TrainJob's reason and message from Kueue's Workload; any other state is left as it is."""
    if stopped is None or status.state != c.STATE_SUSPENDED:
        return status
    status.reason, status.message = stopped
    return status
