"""The reconcile of one TrainJob as pure decisions; `controller/reconciler.py` only reads, executes and records.

One pass: `ignored` (not ours, or being deleted) → `stage` (finished, unsupported, running, to build) → for a build,
the runtime snapshot (`snapshot_source`) and `children` (the writes, with the JobSet rebuild decisions; an apply
error is judged by `rebuild_after_refusal`) → `status` (the status plugin and the lifecycle timers) →
`after_startup_check` when the startup deadline passed → `observed_status` (the pods' health) → `status_patch` (or no write) and, for a
failure, `event`. No I/O and no clock: every object and `now` come in as arguments.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..api import constants as c
from ..api.runtime import RunPolicy, RuntimeModels
from ..api.trainjob import Condition, TrainJob, TrainJobStatus
from . import goodput, review, stall
from .conditions import find, is_finished, rfc3339, set_condition
from .errors import BuildError, describe, printable
from .framework import Manifest, Mode
from .health import PodWarning, apply_health, requested_nodes, trainjob_event
from .identity import WAIT_FIRST_SECONDS, WAIT_NOTICE_SECONDS, Stranger, own, stranger, wait_seconds
from .info import RuntimeInfo, RuntimeSource
from .kueue import explain_suspension
from .lifecycle import STARTUP_RECHECK_SECONDS, StartupCheck, needs_rebuild
from .observed import ObjectRef, Observed
from .pipeline import Framework
from .snapshot import runtime_from_snapshot
from .status import StatusOutcome, startup_failed, with_reconcile_error

EVENT_MESSAGE_LIMIT = 950
"""Characters of an Event's note before it is cut (the API server refuses notes over 1 KiB)."""


class Failure(Exception):
    """A failure that belongs in the TrainJob's status (ReconcileFailed) and one Warning Event: (reason, message)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Failure) and (self.reason, self.message) == (other.reason, other.message)

    def __hash__(self) -> int:
        return hash((self.reason, self.message))

    def __repr__(self) -> str:
        return f"Failure({self.reason!r}, {self.message!r})"


# --- writes ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Apply:
    """Server-side apply (forced, the operator's field manager)."""

    obj: Manifest


@dataclass(frozen=True)
class Create:
    """A plain create; a conflict means the object exists (created once, never updated)."""

    obj: Manifest


@dataclass(frozen=True)
class Delete:
    api_version: str
    kind: str
    name: str
    namespace: str | None
    propagation: str = "Background"
    uid: str | None = None
    """Only this incarnation (a precondition): an object re-created under the same name is not touched."""
    resource_version: str | None = None
    """Only the version read (a precondition): a stale cache view (the JobSet resumed meanwhile, say by the replica
    that led before a failover) deletes nothing."""


@dataclass(frozen=True)
class Keep:
    """Leave the refused object as it is; the event that changes the decision (a resume) brings the TrainJob back."""


Write = Apply | Create | Delete


def ref_of(obj: Manifest) -> ObjectRef:
    return ObjectRef(obj["apiVersion"], obj["kind"], (obj.get("metadata") or {}).get("name", ""))


def describe_write(write: Write) -> str:
    """`Kind namespace/name`, as failures name the object."""
    if isinstance(write, Delete):
        return f"{write.kind} {write.namespace}/{write.name}"
    meta = write.obj["metadata"]
    return f"{write.obj['kind']} {meta.get('namespace')}/{meta['name']}"


# --- which pass ----------------------------------------------------------------------------------------------------


class Stage(StrEnum):
    FINISHED = "finished"
    """Terminal means terminal: no child is (re)created or updated; the status still follows the JobSet."""
    UNSUPPORTED = "unsupported"
    """The runtimeRef names no kind this operator serves: Failed, nothing built."""
    RUNNING = "running"
    """A running JobSet is never re-applied (nor its PodGroups): only the status is followed, no runtime read."""
    BUILD = "build"
    """Build and write every child (first build, suspended, resumed, resized)."""


def ignored(job: TrainJob, body: dict[str, Any]) -> bool:
    """Another controller manages it (`spec.managedBy`), or it is being deleted (TTL or a user): nothing to do."""
    if review.foreign_manager(job) is not None:
        return True
    return bool((body.get("metadata") or {}).get("deletionTimestamp"))


def supported(job: TrainJob) -> bool:
    return review.runtime_key(job) is not None


def stage(job: TrainJob, jobset: dict[str, Any] | None) -> Stage:
    """`jobset`: the JobSet under the TrainJob's name, whoever controls it (only its own counts)."""
    if is_finished((job.status or TrainJobStatus()).conditions):
        return Stage.FINISHED
    if not supported(job):
        return Stage.UNSUPPORTED
    mine = own(job, jobset)
    if mine is not None and not job.spec.suspend and not (mine.get("spec") or {}).get("suspend"):
        return Stage.RUNNING
    return Stage.BUILD


def unsupported(job: TrainJob, now: datetime) -> StatusOutcome:
    ref = job.spec.runtime_ref
    status = (job.status or TrainJobStatus()).model_copy(deep=True)
    conditions = list(status.conditions or [])
    set_condition(
        conditions,
        Condition(
            type=c.CONDITION_FAILED,
            status="True",
            reason=c.REASON_RUNTIME_NOT_SUPPORTED,
            message=f"unsupported runtime: {ref.kind}.{ref.api_group}",
        ),
        now,
    )
    status.conditions = conditions
    return StatusOutcome(status)


# --- the runtime snapshot ------------------------------------------------------------------------------------------


def runtime_missing(job: TrainJob) -> Failure:
    ref = job.spec.runtime_ref
    if ref.kind == c.TRAINING_RUNTIME_KIND:
        message = (
            f'TrainingRuntime specified in TrainJob is not found: TrainingRuntime.{c.GROUP} "{ref.name}" not found'
        )
    else:
        message = (
            f"not found ClusterTrainingRuntime specified in TrainJob: ClusterTrainingRuntime.{c.GROUP} "
            f'"{ref.name}" not found'
        )
    return Failure(c.REASON_RUNTIME_NOT_FOUND, message)


def snapshot_source(job: TrainJob, configmap: dict[str, Any] | None, models: RuntimeModels) -> RuntimeSource:
    """The snapshot path (the live runtime is gone, or its snapshot exists already: the create conflicted): the
    runtime saved in the snapshot ConfigMap, checked against the TrainJob's owner and runtimeRef. Raises Failure, or
    Blocked for a predecessor's snapshot (never read: the TrainJob waits for it to go). `models`: the framework's
    (`Framework.runtime_models`)."""
    if configmap is None:
        raise runtime_missing(job)
    found = stranger(job, configmap)
    if found is not None and found.predecessor:
        raise Blocked((found,))
    try:
        return runtime_from_snapshot(job, configmap, models)
    except BuildError as err:
        raise Failure(c.REASON_INVALID_SNAPSHOT, str(err)) from err


# --- the children ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Children:
    writes: tuple[Write, ...]
    """In order: JobSet rebuild deletes take the place of the JobSet's apply."""
    probes: tuple[ObjectRef, ...] = ()
    """Children the build would apply (or of probed kinds) not known yet: read whether they exist and whose they
    are, then plan again (an apply would otherwise take over a predecessor's object of the same name)."""
    nodes: int | None = None
    """The nodes as the TrainJob asks for them (status.nodes, `health.requested_nodes`)."""


def strangers(job: TrainJob, observed: Observed) -> tuple[Stranger, ...]:
    """The objects under this build's child names that are not this TrainJob's (the JobSet first)."""
    found = (stranger(job, obj) for obj in (observed.jobset, *observed.read.values()))
    return tuple(s for s in found if s is not None)


def children(framework: Framework, job: TrainJob, runtime: RuntimeSource, observed: Observed) -> Children:
    """Every write of a build. Raises Failure (BuildFailed) for what the plugins cannot build, Blocked when an
    object under a child's name is not this TrainJob's (nothing is written then)."""
    blocking = strangers(job, observed)
    if blocking:
        raise Blocked(blocking)
    observed = replace(observed, existing=observed.existing | {ref for ref, obj in observed.read.items() if obj})
    try:
        info: RuntimeInfo = framework.runtime_info(job, runtime, observed)
        built = framework.build(info, job, observed)
    except (BuildError, ValueError) as err:
        raise Failure(c.REASON_BUILD_FAILED, str(err)) from err
    except Exception as err:  # pure code: a crash on this TrainJob's input is this TrainJob's failure
        raise Failure(c.REASON_BUILD_FAILED, describe(err)) from err
    probed = {(k.api_version, k.kind) for k in framework.kinds() if k.probe}
    probes = tuple(
        ref
        for ref, mode in ((ref_of(obj), mode) for obj, mode in built)
        if ref.kind != c.JOBSET_KIND  # watched: the cache tells
        and (mode is Mode.APPLY or (ref.api_version, ref.kind) in probed)  # a create's conflict tells
        and ref not in observed.existing
        and ref not in observed.read
    )
    writes: list[Write] = []
    for obj, mode in built:
        if obj["kind"] == c.JOBSET_KIND and observed.jobset is not None:
            meta = observed.jobset.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue  # being deleted for a rebuild: its DELETED event brings the TrainJob back
            if needs_rebuild(obj, observed.jobset):
                # Resized while suspended: JobSet keeps replicatedJobs immutable, so the JobSet is deleted
                # (foreground: its Jobs go first, so the new one's Jobs cannot collide with them) and built again at
                # the new size once it is gone. Secrets and the snapshot stay.
                writes.append(
                    Delete(
                        c.JOBSET_API_VERSION,
                        c.JOBSET_KIND,
                        job.name,
                        job.namespace,
                        "Foreground",
                        meta.get("uid"),
                        meta.get("resourceVersion"),
                    )
                )
                continue
        writes.append(Create(obj) if mode is Mode.CREATE_ONCE else Apply(obj))
    return Children(tuple(writes), probes, requested_nodes(info))


def probe_creates(children: Children) -> dict[ObjectRef, Create]:
    """The probes as creates, by ref in the probes' order: each child not known yet can be created with its build's
    body, and a create that succeeds makes it this TrainJob's with no read (the API server said nothing was there,
    which is all a read that finds nothing says; issue 37: that read was one request in four of a new TrainJob's).
    The shell sends them until one conflicts, then reads that one and the rest as before (and plans again with what
    they found). A probe without a write of its own (none today) is read."""
    by_ref = {ref_of(w.obj): w.obj for w in children.writes if not isinstance(w, Delete)}
    return {ref: Create(by_ref[ref]) for ref in children.probes if ref in by_ref}


def applied_digest(write: Write) -> bytes | None:
    """What identifies an apply's body, for a child other than the JobSet (None for the JobSet and for creates and
    deletes). The JobSet is applied on every build, as upstream does (it carries suspend and Kueue's patches; the API
    server's answer is what the status follows); the other applied children (the status server's CA ConfigMap, an MPI
    hostfile, a PodGroup) change only with their body."""
    if not isinstance(write, Apply) or write.obj["kind"] == c.JOBSET_KIND:
        return None
    return hashlib.blake2b(json.dumps(write.obj, sort_keys=True).encode(), digest_size=16).digest()


def unchanged(write: Write, applied: Mapping[ObjectRef, bytes]) -> bool:
    """An apply this process sent already with the same body (`applied`: the digests of this TrainJob's last
    successful applies): skipped. Server-side apply would change nothing, and on a resume it would delay the JobSet by
    one round trip. Objects the pods consume are still written before the JobSet whenever their body changes."""
    if not isinstance(write, Apply):
        return False
    digest = applied_digest(write)
    return digest is not None and applied.get(ref_of(write.obj)) == digest


def rebuild_after_refusal(
    framework: Framework, write: Write, status: int, message: str, observed: Observed, suspended: bool
) -> Delete | Keep | None:
    """An apply the API server refused. A JobSet of an older shape (another controller's, or built before the v2.4
    env) that refuses the update as immutable and never ran is kept as it is while the TrainJob stays suspended, so
    a takeover re-creates nothing; on resume it is deleted (only the version read) and applied again, the delete to
    send first (docs/compatibility.md D24). Anything else is a failure (None)."""
    if not isinstance(write, Apply) or write.obj["kind"] != c.JOBSET_KIND:
        return None
    if not (status in (403, 422) and "immutable" in message):
        return None
    if not framework.rebuildable(c.JOBSET_API_VERSION, c.JOBSET_KIND, observed.jobset):
        return None
    if suspended:
        return Keep()
    meta = write.obj["metadata"]
    read = (observed.jobset or {}).get("metadata") or {}
    return Delete(
        c.JOBSET_API_VERSION,
        c.JOBSET_KIND,
        meta["name"],
        meta.get("namespace"),
        uid=read.get("uid"),
        resource_version=read.get("resourceVersion"),
    )


def write_failed(write: Write, message: str) -> Failure:
    verb = "create" if isinstance(write, Create) else "apply"
    return Failure(c.REASON_APPLY_FAILED, f"failed to {verb} {describe_write(write)}: {message}")


# --- the status -----------------------------------------------------------------------------------------------------


def status(
    framework: Framework, job: TrainJob, jobset: dict[str, Any] | None, now: datetime, policy: RunPolicy
) -> tuple[StatusOutcome, Failure | None]:
    """The status plugin's view and the lifecycle timers, from this TrainJob's own JobSet only (`jobset` as read,
    whoever controls it: terminal conditions never come from another incarnation's); if that fails on this
    TrainJob, the status keeps what it had and the failure is reported (BuildFailed)."""
    try:
        return framework.status(job, Observed(jobset=own(job, jobset)), now, policy), None
    except Exception as err:  # pure code: whatever it raises is about this TrainJob, never an outage
        current = job.status or TrainJobStatus()
        return StatusOutcome(current.model_copy(deep=True)), Failure(
            c.REASON_BUILD_FAILED, f"cannot compute the status: {describe(err)}"
        )


def after_startup_check(outcome: StatusOutcome, check: StartupCheck, policy: RunPolicy, now: datetime) -> StatusOutcome:
    """The startup deadline passed and the pods were listed: a stuck pod fails the TrainJob (and its JobSet goes);
    otherwise come back to look again, unless every pod started."""
    if check.stuck is not None:
        failed = startup_failed(outcome.status, check.stuck, policy.startup_deadline_seconds or 0, now)
        return replace(outcome, status=failed, delete_jobset=True, requeue_after=None, check_startup=False)
    if check.started:
        return outcome
    return pods_unreadable(outcome)


def pods_unreadable(outcome: StatusOutcome) -> StatusOutcome:
    wait = outcome.requeue_after
    return replace(outcome, requeue_after=min(wait, STARTUP_RECHECK_SECONDS) if wait else STARTUP_RECHECK_SECONDS)


def final_status(
    job: TrainJob, outcome: StatusOutcome, failure: Failure | None, nodes: int | None, now: datetime
) -> TrainJobStatus:
    """The status to write: ReconcileFailed for a failure (dropped without one), the state, the node count."""
    return observed_status(job, outcome, failure, nodes, now)[0]


def observed_status(
    job: TrainJob,
    outcome: StatusOutcome,
    failure: Failure | None,
    nodes: int | None,
    now: datetime,
    jobset: dict[str, Any] | None = None,
    pods: Sequence[dict[str, Any]] | None = None,
    stopped: tuple[str, str] | None = None,
) -> tuple[TrainJobStatus, tuple[PodWarning, ...]]:
    """The status to write, from the conditions and what the JobSet's pods say (`pods` None: unknown), and the
    Warning Events the pods call for (runtime/health.py); `stopped`: why Kueue stopped it (runtime/kueue.py)."""
    result = with_reconcile_error(outcome.status, (failure.reason, failure.message) if failure else None, now)
    health = apply_health(job, result, jobset, pods)
    explain_suspension(result, stopped)
    if nodes is not None:
        result.nodes = nodes
    return result, health.warnings


@dataclass(frozen=True)
class ProgressWatch:
    """The status after the progress watch and the goodput accounting (issue 35), and what a stall asks for."""

    status: TrainJobStatus
    warnings: tuple[PodWarning, ...] = ()
    """The stall's Warning Event (one per stall: named after the TrainJob's uid and the stall)."""
    delete: Delete | None = None
    """The JobSet to delete once the status is written: a stall restart (the rebuild follows when it is gone) or a
    stall failure."""
    requeue_after: float | None = None
    """When the stall limit passes if no report comes."""
    stalled: str | None = None
    """The action a stall detected in this pass took (Report, Restart, Fail): the counter's label."""


def watch_progress(
    job: TrainJob, status: TrainJobStatus, policy: RunPolicy, jobset: dict[str, Any] | None, now: datetime
) -> ProgressWatch:
    """Stall detection and the goodput accounting over the status `observed_status` computed (`jobset`: the
    TrainJob's own), which is completed in place (a fresh object of this pass: no copy, the copy cost more than the
    rest). Everything it needs is in the status (the progress reports, `goodput`: the phase, the stall, the restart
    under way), so a new leader or a restarted operator decides the same, restarts nothing twice and misses no
    stall."""
    result = status
    before = job.status.goodput if job.status is not None else None
    if (
        before is None
        and result.trainer_status is None
        and not stall.enabled(policy.stall_policy)
        and goodput.phase_of(result.state, None) in (None, goodput.initial_phase(job))
    ):
        return ProgressWatch(result)  # nothing accounted yet and nothing to account: a new TrainJob's passes stay cheap
    fresh = goodput.initial(job, now) if before is None else None
    g = before if before is not None else fresh
    assert g is not None
    meta = (jobset or {}).get("metadata") or {}
    jobset_uid = meta.get("uid")
    verdict = stall.StallVerdict()
    warnings: tuple[PodWarning, ...] = ()
    delete: Delete | None = None
    taken: str | None = None
    was = job.status if job.status is not None else TrainJobStatus()
    if g.restart_of and jobset_uid == g.restart_of and not is_finished(result.conditions):
        # A stall restart decided (and recorded) before: delete that JobSet until it is gone, never count it again.
        if not meta.get("deletionTimestamp"):
            delete = Delete(c.JOBSET_API_VERSION, c.JOBSET_KIND, job.name, job.namespace, "Foreground", uid=jobset_uid)
        # Its teardown is still the stall (the stalled pods hold their nodes until they are gone): Stalled, not the
        # Pending its terminating pods would say, so the state is seen for more than the one pass that deleted it.
        if result.state in (c.STATE_RUNNING, c.STATE_PENDING, c.STATE_RESTARTING):
            result.state, result.reason, result.message = c.STATE_STALLED, was.reason, was.message
    elif g.phase == goodput.STALLED and g.restart_of and jobset_uid and jobset_uid != g.restart_of:
        # The restart's new JobSet, and the status still says the stall: the writes that end it (Stalled until the
        # old JobSet is gone, then Restarting) were lost to an operator down from the delete to the rebuild. The
        # stall ended with its JobSet; this attempt is judged from now on, as any new attempt is.
        pass
    else:
        verdict = stall.check(policy.stall_policy, result.trainer_status, g, now, result.state == c.STATE_RUNNING)
    if verdict.stalled and not verdict.new:
        result.state, result.reason, result.message = c.STATE_STALLED, was.reason, was.message
    elif verdict.new:
        action = stall.action_of(policy.stall_policy)
        # restartOf names the JobSet of this stall's restart, or none: one of an earlier stall's must not say this
        # stall was restarted (the branch above would end it at once).
        g = g.model_copy(update={"stalls": (g.stalls or 0) + 1, "stalled_report": verdict.report, "restart_of": None})
        message = verdict.message or ""
        if action == "Restart":
            left = stall.restarts_left(jobset)
            if left > 0 and jobset_uid:
                message += f"; restarting the JobSet ({left - 1} of its restarts left)"
                g = g.model_copy(update={"restart_of": jobset_uid})
                counts = result.restart_counts
                if counts is not None:
                    result.restart_counts = counts.model_copy(update={"job_set": counts.job_set + 1})
                result.restarts = (result.restarts or 0) + 1
                delete = Delete(
                    c.JOBSET_API_VERSION, c.JOBSET_KIND, job.name, job.namespace, "Foreground", uid=jobset_uid
                )
            else:
                action = "Fail"
                message += "; no restart left (the JobSet's failurePolicy.maxRestarts is spent or unset)"
        if action == "Fail":
            conditions = list(result.conditions or [])
            set_condition(
                conditions,
                Condition(
                    type=c.CONDITION_FAILED,
                    status="True",
                    reason=c.REASON_PROGRESS_STALLED,
                    message=printable(message),
                    last_transition_time=rfc3339(now),
                ),
                now,
            )
            result.conditions = conditions
            result.completion_time = result.completion_time or rfc3339(now)
            result.state, result.reason = c.STATE_FAILED, c.REASON_PROGRESS_STALLED
            delete = delete_jobset(job, jobset)
        else:
            result.state, result.reason = c.STATE_STALLED, verdict.reason
        result.message = printable(message)[:1024]
        key = f"stalled/{g.stalls}/{verdict.report}"
        warnings = (PodWarning(c.EVENT_STALLED, f"{message}; action {action}", key),)
        taken = action
    accounted = goodput.account(
        job,
        g,
        result.state,
        now,
        goodput.accelerators(jobset),
        result.trainer_status,
        at=verdict.since if verdict.new or verdict.resumed else None,
    )
    if before is not None or accounted != fresh:  # none written before the first change
        result.goodput = accounted
    requeue = verdict.requeue_after
    if accounted.phase == goodput.TRAINING and g.phase != goodput.TRAINING and not verdict.stalled:
        # Training begins in this pass: come back when its first limit passes (no event may come before).
        requeue = stall.check(
            policy.stall_policy, result.trainer_status, accounted, now, result.state == c.STATE_RUNNING
        ).requeue_after
    return ProgressWatch(result, warnings, delete, requeue, taken)


def status_patch(job: TrainJob, desired: TrainJobStatus) -> dict[str, Any] | None:
    """The merge patch of `status` (changed fields only), or None when nothing is to be written: no change, or
    nothing to report yet (a new TrainJob that is only Pending: the first real change carries the state, so a
    never-suspended TrainJob costs no more writes than upstream's)."""
    before = job.status.to_wire() if job.status is not None else {}
    after = desired.to_wire()
    if before == after:
        return None
    if (
        not before
        and set(after) <= {"state", "nodes", "startTime", "restarts", "goodput"}
        and after.get("state") == c.STATE_PENDING
        and not after.get("restarts")
    ):
        return None
    return {k: after.get(k) for k in set(before) | set(after) if before.get(k) != after.get(k)}


@dataclass(frozen=True)
class StatusRequest:
    """How a status patch is sent so that it lands on this incarnation of the TrainJob only (a reconcile that
    started before the TrainJob was deleted and created again under its name must not write the new one)."""

    json_patch: bool
    """True: a JSON patch whose first operation tests metadata.uid; False: a merge patch locked to the
    resourceVersion read (the first status write, when there is no status to patch field by field; a uid in a merge
    patch of the status is ignored by the API server, the resourceVersion is not)."""
    body: dict[str, Any] | list[dict[str, Any]]


def status_request(job: TrainJob, patch: dict[str, Any], resource_version: str | None) -> StatusRequest:
    """`patch` (status_patch's changed fields) as a request bound to this TrainJob's uid (`resource_version`: the
    version read). Field by field as the merge patch was, so fields other writers own (trainerStatus, by the status
    server) are left as they are."""
    if job.status is None or not job.status.to_wire():
        lock = {"metadata": {"resourceVersion": resource_version}} if resource_version else {}
        return StatusRequest(False, {**lock, "status": patch})
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": job.metadata.uid}]
    for key in sorted(patch):
        path = "/status/" + key.replace("~", "~0").replace("/", "~1")
        value = patch[key]
        ops.append({"op": "remove", "path": path} if value is None else {"op": "add", "path": path, "value": value})
    return StatusRequest(True, ops)


def event(job: TrainJob, failure: Failure, last_message: str | None, now: datetime) -> dict[str, Any] | None:
    """One Warning Event per distinct failure (upstream's reason and note), not one per retry: None when the last
    failure recorded for this TrainJob had the same message."""
    if last_message == failure.message:
        return None
    note = f"TrainJob resources reconciliation failed: {failure.message}"
    return event_body(job, c.EVENT_RESOURCES_CREATION_FAILED, note, "Warning", "Reconciling", now)


def event_body(job: TrainJob, reason: str, note: str, type_: str, action: str, now: datetime) -> dict[str, Any]:
    """An Event about this TrainJob (this incarnation: its uid), the note escaped (`printable`) and cut to what the
    API server accepts."""
    note = printable(note)
    if len(note) > EVENT_MESSAGE_LIMIT:
        note = note[:EVENT_MESSAGE_LIMIT] + " ..."
    return trainjob_event(job, {"generateName": f"{job.name}."}, reason, note, action, rfc3339(now), type_)


def delete_jobset(job: TrainJob, jobset: dict[str, Any] | None) -> Delete | None:
    """A deadline passed (active or startup): this TrainJob's JobSet goes (only that incarnation), the TrainJob
    stays Failed. None when it has no JobSet of its own (an object under its name that is not its own is never
    touched here)."""
    uid = ((jobset or {}).get("metadata") or {}).get("uid")
    if not uid:
        return None
    return Delete(c.JOBSET_API_VERSION, c.JOBSET_KIND, job.name, job.namespace, uid=uid)


def delete_trainjob(job: TrainJob) -> Delete:
    """ttlSecondsAfterFinished: the TrainJob itself goes (this incarnation only), its children by garbage
    collection."""
    return Delete(c.API_VERSION, c.TRAINJOB_KIND, job.name, job.namespace, uid=job.metadata.uid)


# --- objects under the children's names that are not this TrainJob's (runtime/identity.py) -------------------------


class Blocked(Exception):
    """Objects under this TrainJob's child names are not its own: nothing is built until they are gone."""

    def __init__(self, strangers: tuple[Stranger, ...]) -> None:
        super().__init__(", ".join(s.ref.name for s in strangers))
        self.strangers = strangers


@dataclass(frozen=True)
class Waiting:
    deletes: tuple[Delete, ...]
    """The predecessor's objects not being deleted yet: deleted now (only that incarnation)."""
    reason: str
    message: str
    requeue_after: float
    overdue: bool
    """Waited past WAIT_NOTICE_SECONDS: the Event is a Warning."""


def waiting(job: TrainJob, strangers: tuple[Stranger, ...], now: datetime) -> Waiting:
    """What a blocked TrainJob does: delete its predecessor's objects (a JobSet in the foreground, so its Jobs go
    before it and a new JobSet of this name cannot take them), leave any other object alone, and look again with
    backoff, saying in a Pending condition what it waits for and since when."""
    deletes = tuple(
        Delete(
            s.ref.api_version,
            s.ref.kind,
            s.ref.name,
            job.namespace,
            "Foreground" if s.ref.kind == c.JOBSET_KIND else "Background",
            uid=s.uid or None,
        )
        for s in strangers
        if s.predecessor and not s.deleting
    )
    foreign = [s for s in strangers if not s.predecessor]
    previous = find((job.status or TrainJobStatus()).conditions, c.CONDITION_PENDING)
    since = now
    if previous is not None and previous.status == "True" and previous.last_transition_time:
        since = min(now, datetime.fromisoformat(previous.last_transition_time.replace("Z", "+00:00")))
    waited = (now - since).total_seconds()
    named = "; ".join(s.describe(job.namespace) for s in strangers[:5])
    if len(strangers) > 5:
        named += f"; and {len(strangers) - 5} more"
    if foreign:
        reason = c.REASON_NAME_IN_USE
        message = (
            f"waiting: objects under this TrainJob's child names are not its own and are left alone: {named}; "
            "delete them, or create the TrainJob under another name"
        )
    else:
        reason = c.REASON_PREVIOUS_TRAINJOB
        message = (
            f"waiting for the objects of a previous TrainJob of this name to be deleted: {named}; "
            "nothing of them is reused"
        )
    overdue = waited >= WAIT_NOTICE_SECONDS
    if overdue and not foreign:
        message += (
            f"; still present after {int(WAIT_NOTICE_SECONDS)} s: the garbage collector "
            "(kube-controller-manager) has not removed them"
        )
    # Right after deleting, look again at once: a Secret or ConfigMap is gone then, and the next of the
    # predecessor's objects (each found as the build gets to it) is deleted without waiting out a backoff.
    requeue = WAIT_FIRST_SECONDS if deletes else wait_seconds(waited)
    return Waiting(deletes, reason, message, requeue, overdue)


def pending(status: TrainJobStatus, wait: Waiting | None, now: datetime) -> TrainJobStatus:
    """The Pending condition while `wait` lasts; dropped (not set False) once it is over, so a TrainJob that never
    waited carries no such condition."""
    result = status.model_copy(deep=True)
    conditions = [cond for cond in result.conditions or [] if cond.type != c.CONDITION_PENDING]
    if wait is not None:
        kept = list(result.conditions or [])
        set_condition(
            kept, Condition(type=c.CONDITION_PENDING, status="True", reason=wait.reason, message=wait.message), now
        )
        conditions = kept
    result.conditions = conditions or None
    return result


def waiting_event(job: TrainJob, wait: Waiting, last_message: str | None, now: datetime) -> dict[str, Any] | None:
    """One Event when the wait begins (Normal) and one when it is overdue (Warning); None otherwise."""
    if last_message == wait.message:
        return None
    return event_body(job, wait.reason, wait.message, "Warning" if wait.overdue else "Normal", "Waiting", now)
