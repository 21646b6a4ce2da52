"""The level-based reconcile of one TrainJob: read what exists, build with the core, apply, write status.

No kopf here: the handlers feed the store and the queue, the queue calls `Reconciler.reconcile`.
"""

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from ..api import constants as c
from ..api.runtime import ClusterTrainingRuntime, RunPolicy, TrainingRuntime
from ..api.trainjob import TrainJob, TrainJobStatus
from ..k8s.client import ApiError, Client
from ..logs import error_fields, get
from ..metrics import Metrics
from ..runtime.conditions import is_finished
from ..runtime.errors import BuildError, describe
from ..runtime.info import RuntimeSource
from ..runtime.lifecycle import STARTUP_RECHECK_SECONDS, check_startup, effective_run_policy, needs_rebuild
from ..runtime.observed import Observed, StatusServer
from ..runtime.pipeline import Framework
from ..runtime.plugins.jobset import rebuildable
from ..runtime.snapshot import build_snapshot, runtime_from_snapshot, snapshot_name
from ..runtime.status import StatusOutcome, startup_failed, trainjob_state, with_reconcile_error
from .store import Key, Store

log = get("trainjob_operator.reconciler")

EVENT_MESSAGE_LIMIT = 950
SUPPORTED_KINDS = (c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND)


def _runtime_missing(kind: str, name: str) -> str:
    if kind == c.TRAINING_RUNTIME_KIND:
        return f'TrainingRuntime specified in TrainJob is not found: TrainingRuntime.{c.GROUP} "{name}" not found'
    return (f"not found ClusterTrainingRuntime specified in TrainJob: ClusterTrainingRuntime.{c.GROUP} "
            f'"{name}" not found')


class ReconcileError(Exception):
    """A failure that belongs in the TrainJob's status: (reason, message)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


class NotLeading(Exception):
    """This replica lost the Lease during the pass: the write was not sent."""


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class Result:
    requeue_after: float | None = None
    error: bool = False


@dataclass
class Reconciler:
    client: Client
    store: Store
    framework: Framework
    metrics: Metrics
    clock: Callable[[], dt.datetime] = utcnow
    status_server: Callable[[], StatusServer | None] = lambda: None
    """Where trainer pods report progress (None: the status server is off and nothing is injected)."""
    may_write: Callable[[], bool] = lambda: True
    """Checked before every write: a replica whose Lease lapsed mid-pass writes nothing (no split brain)."""
    writes: dict[str, int] = field(default_factory=dict)
    sources: dict[tuple[Any, ...], RuntimeSource] = field(default_factory=dict)
    snapshot_sources: dict[str, RuntimeSource] = field(default_factory=dict)

    # --- runtime lookup (shared with the webhooks) --------------------------------------------------

    async def lookup_runtime(self, kind: str, namespace: str, name: str) -> RuntimeSource | None:
        """From the cache; on a miss, read through to the API so a runtime created a moment ago is found."""
        if kind == c.CLUSTER_TRAINING_RUNTIME_KIND:
            raw = self.store.cluster_runtimes.get(("", name))
            if raw is None:
                raw = await self.client.get(c.API_VERSION, kind, name)
                if raw is not None:
                    self.store.cluster_runtimes.put(raw)
            model: type[TrainingRuntime] | type[ClusterTrainingRuntime] = ClusterTrainingRuntime
        else:
            raw = self.store.runtimes.get((namespace, name))
            if raw is None:
                raw = await self.client.get(c.API_VERSION, kind, name, namespace)
                if raw is not None:
                    self.store.runtimes.put(raw)
            model = TrainingRuntime
        if raw is None:
            return None
        meta = raw.get("metadata") or {}
        version = (kind, meta.get("namespace"), meta.get("name"), meta.get("resourceVersion"))
        source = self.sources.get(version)
        if source is None:  # parsed once per runtime version, shared by every TrainJob that uses it
            source = RuntimeSource.of(model.model_validate(raw))
            if len(self.sources) > 1024:
                self.sources.clear()
            self.sources[version] = source
        return source

    # --- the reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> Result:
        started = time.perf_counter()
        result = Result(error=True)
        try:
            result = await self._reconcile(key)
            return result
        finally:
            self.metrics.reconcile_seconds.labels(result="error" if result.error else "ok").observe(
                time.perf_counter() - started)

    async def _reconcile(self, key: Key) -> Result:
        body = self.store.trainjobs.get(key)
        if body is None:
            return Result()
        try:
            job = TrainJob.model_validate(body)
        except ValidationError as err:  # the API server validated it; an older CRD may let odd objects in
            log.error("TrainJob does not parse; skipped", namespace=key[0], name=key[1], error=str(err))
            return Result()
        bound = log.bind(namespace=job.namespace, name=job.name, uid=job.metadata.uid)
        if job.spec.managed_by not in (None, c.DEFAULT_MANAGED_BY):
            return Result()
        now = self.clock()
        error: ReconcileError | None = None
        nodes: int | None = job.status.nodes if job.status is not None else None
        outcome: StatusOutcome
        current = job.status or TrainJobStatus()
        if (body.get("metadata") or {}).get("deletionTimestamp"):
            return Result()  # being deleted (by its TTL, or by a user): nothing to build, no status to write
        policy = await self._run_policy(job)
        if is_finished(current.conditions):
            # Terminal means terminal: no child is ever (re)created or updated for a finished TrainJob. Its status
            # still follows the JobSet while that exists (jobsStatus), as upstream's does.
            outcome, error = self._status(job, key, current, now, policy)
        elif job.spec.runtime_ref.api_group != c.GROUP or job.spec.runtime_ref.kind not in SUPPORTED_KINDS:
            outcome = self._unsupported(job, now)
        else:
            jobset = self.store.jobsets.get(key)
            running = jobset is not None and not job.spec.suspend and not (jobset.get("spec") or {}).get("suspend")
            try:
                # §5.4: a running JobSet is never re-applied, nor its PodGroups; everything else it needs was
                # applied before it. So there is nothing to build, only the status to follow (and no snapshot to
                # load: a restart with thousands of running TrainJobs costs no requests).
                if not running:
                    nodes = await self._build_and_apply(job, now)
                    if nodes is not None:
                        self.store.known.nodes[job.metadata.uid or ""] = nodes
                else:
                    nodes = self.store.known.nodes.get(job.metadata.uid or "", nodes)
                self.store.known.last_error.pop(job.metadata.uid or "", None)
            except ReconcileError as err:
                error = err
                self.metrics.apply_errors.labels(reason=err.reason).inc()
                bound.warning("reconcile failed", reason=err.reason, error=err.message)
                await self._event(job, err)
            outcome, status_error = self._status(job, key, current, now, policy)
            error = error or status_error
            if outcome.check_startup:
                outcome = await self._check_startup(job, outcome, policy, now)
            if outcome.delete_jobset:
                bound.info("deadline exceeded; deleting the JobSet")
                await self._write("delete", self.client.delete(c.JOBSET_API_VERSION, c.JOBSET_KIND, job.name,
                                                               job.namespace))
                self.store.jobsets.remove(key)
        if outcome.delete_trainjob:
            # ttlSecondsAfterFinished: the TrainJob itself goes, its children by garbage collection. Only this
            # incarnation (uid precondition): a TrainJob re-created under the same name is not touched.
            bound.info("TTL after finished expired; deleting the TrainJob",
                       completion_time=outcome.status.completion_time,
                       ttl_seconds_after_finished=policy.ttl_seconds_after_finished)
            await self._write("delete", self.client.delete(c.API_VERSION, c.TRAINJOB_KIND, job.name, job.namespace,
                                                           uid=job.metadata.uid))
            self.metrics.ttl_deletions.inc()
            return Result()
        status = with_reconcile_error(outcome.status, (error.reason, error.message) if error else None, now)
        status.state = trainjob_state(job, status)  # type: ignore[assignment]
        if nodes is not None:
            status.nodes = nodes
        await self._write_status(job, status)
        return Result(requeue_after=outcome.requeue_after, error=error is not None)

    async def _run_policy(self, job: TrainJob) -> RunPolicy:
        """The effective run policy: the TrainJob's fields over its runtime's `runPolicy` defaults. The runtime is
        the snapshot in force when known, else the live one (watch cache, read through), else the snapshot read
        back (the runtime was deleted); an unreadable runtime contributes no defaults."""
        source = self.store.known.snapshots.get(job.metadata.uid or "")
        ref = job.spec.runtime_ref
        if source is None and ref.api_group == c.GROUP and ref.kind in SUPPORTED_KINDS:
            try:
                source = await self.lookup_runtime(ref.kind or c.CLUSTER_TRAINING_RUNTIME_KIND, job.namespace,
                                                   ref.name)
                if source is None:
                    configmap = await self.client.get("v1", "ConfigMap", snapshot_name(job), job.namespace)
                    source = runtime_from_snapshot(job, configmap) if configmap is not None else None
            except (ApiError, ValidationError, BuildError) as err:
                log.warning("cannot read the runtime's run policy", namespace=job.namespace, name=job.name,
                            error=str(err))
        return effective_run_policy(job, source.spec.run_policy if source is not None else None)

    async def _check_startup(self, job: TrainJob, outcome: StatusOutcome, policy: RunPolicy,
                             now: dt.datetime) -> StatusOutcome:
        """The startup deadline passed: fail the TrainJob if one of its pods still cannot start."""
        uid = job.metadata.uid or ""
        if uid in self.store.known.started:
            return outcome
        try:
            pods = await self.client.list("v1", "Pod", job.namespace,
                                          label_selector=f"{c.JOBSET_NAME_LABEL}={job.name}")
        except ApiError as err:
            log.warning("cannot list pods for the startup deadline", namespace=job.namespace, name=job.name,
                        error=str(err))
            return replace(outcome, requeue_after=STARTUP_RECHECK_SECONDS)
        check = check_startup(pods)
        if check.stuck is not None:
            log.info("startup deadline exceeded", namespace=job.namespace, name=job.name, pod=check.stuck.name,
                     reason=check.stuck.reason)
            self.metrics.startup_failures.labels(reason=check.stuck.reason).inc()
            failed = startup_failed(outcome.status, check.stuck, policy.startup_deadline_seconds or 0, now)
            return replace(outcome, status=failed, delete_jobset=True, requeue_after=None, check_startup=False)
        if check.started:
            self.store.known.started.add(uid)
            return outcome
        wait = outcome.requeue_after
        return replace(outcome, requeue_after=min(wait, STARTUP_RECHECK_SECONDS) if wait else STARTUP_RECHECK_SECONDS)

    def _status(self, job: TrainJob, key: Key, current: TrainJobStatus, now: dt.datetime,
                policy: RunPolicy) -> tuple[StatusOutcome, ReconcileError | None]:
        """The pure status step; if it fails on this TrainJob, the status keeps what it had plus ReconcileFailed."""
        try:
            return self.framework.status(job, Observed(jobset=self.store.jobsets.get(key)), now, policy), None
        except Exception as err:  # pure code: whatever it raises is about this TrainJob, never an outage
            log.warning("status step failed", namespace=job.namespace, name=job.name, **error_fields(err))
            return StatusOutcome(current.model_copy(deep=True)), ReconcileError(
                c.REASON_BUILD_FAILED, f"cannot compute the status: {describe(err)}")

    def _unsupported(self, job: TrainJob, now: dt.datetime) -> StatusOutcome:
        from ..api.trainjob import Condition
        from ..runtime.conditions import set_condition

        ref = job.spec.runtime_ref
        status = (job.status or TrainJobStatus()).model_copy(deep=True)
        conditions = list(status.conditions or [])
        set_condition(conditions, Condition(type=c.CONDITION_FAILED, status="True",
                                            reason=c.REASON_RUNTIME_NOT_SUPPORTED,
                                            message=f"unsupported runtime: {ref.kind}.{ref.api_group}"), now)
        status.conditions = conditions
        return StatusOutcome(status)

    async def _runtime_for(self, job: TrainJob) -> RuntimeSource:
        """The snapshot in force; created from the live runtime on the first build (v2.3 §5.4).

        The snapshot is created with a plain create (one request): a conflict means it exists, and only then is it
        read and checked. A runtime deleted after the snapshot was taken does not matter.
        """
        uid = job.metadata.uid or ""
        known = self.store.known.snapshots.get(uid)
        if known is not None:
            return known
        ref = job.spec.runtime_ref
        kind = ref.kind or c.CLUSTER_TRAINING_RUNTIME_KIND
        try:
            live = await self.lookup_runtime(kind, job.namespace, ref.name)
        except (ApiError, ValidationError) as err:
            raise ReconcileError(c.REASON_RUNTIME_NOT_FOUND, f"cannot read {kind} {ref.name}: {err}") from err
        source: RuntimeSource | None = None
        if live is not None:
            try:
                await self._write("create", self.client.create(build_snapshot(job, live), c.FIELD_MANAGER))
                source = live
            except ApiError as err:
                if not err.conflict:
                    raise ReconcileError(c.REASON_APPLY_FAILED, f"cannot create the runtime snapshot: "
                                                                f"{err.message}") from err
        if source is None:
            try:
                configmap = await self.client.get("v1", "ConfigMap", snapshot_name(job), job.namespace)
            except ApiError as err:
                raise ReconcileError(c.REASON_APPLY_FAILED, f"cannot read the runtime snapshot: {err}") from err
            if configmap is None:
                raise ReconcileError(c.REASON_RUNTIME_NOT_FOUND, _runtime_missing(kind, ref.name))
            text = str((configmap.get("data") or {}).get("runtime"))
            shared = self.snapshot_sources.get(text)
            try:
                fresh = runtime_from_snapshot(job, configmap)  # checks owner and runtimeRef every time
            except BuildError as err:
                raise ReconcileError(c.REASON_INVALID_SNAPSHOT, str(err)) from err
            if shared is None or (shared.kind, shared.name) != (fresh.kind, fresh.name):
                shared = self.snapshot_sources[text] = fresh  # one parsed runtime per distinct snapshot
            source = shared
        self.store.known.snapshots[uid] = source
        return source

    async def _observe(self, job: TrainJob, runtime: RuntimeSource) -> Observed:
        uid = job.metadata.uid or ""
        known = self.store.known
        policy = runtime.spec.ml_policy
        # The MPI SSH and Flux curve Secrets are created, never updated: a create that conflicts means it is there
        # (see _apply). A runtime has at most one ML policy, so one set of uids serves both.
        secret_exists = uid in known.mpi_secrets
        group_policy = runtime.spec.pod_group_policy
        group_exists = uid in known.pod_groups
        if group_policy is not None and not group_exists and (group_policy.coscheduling or group_policy.volcano):
            api = c.COSCHEDULING_API_VERSION if group_policy.coscheduling else c.VOLCANO_API_VERSION
            group_exists = await self.client.get(api, c.POD_GROUP_KIND, job.name, job.namespace) is not None
            if group_exists:
                known.pod_groups.add(uid)
        return Observed(jobset=self.store.jobsets.get((job.namespace, job.name)),
                        mpi_ssh_secret_exists=secret_exists or policy is None or policy.mpi is None,
                        flux_curve_secret_exists=secret_exists or policy is None or policy.flux is None,
                        pod_group_exists=group_exists, status_server=self.status_server())

    async def _build_and_apply(self, job: TrainJob, now: dt.datetime) -> int | None:
        runtime = await self._runtime_for(job)
        try:
            observed = await self._observe(job, runtime)
        except ApiError as err:
            raise ReconcileError(c.REASON_APPLY_FAILED, f"cannot read existing objects: {err}") from err
        try:
            info = self.framework.runtime_info(job, runtime, observed)
            objects = [o for b in self.framework.builders for o in b.build(info, job, observed)]
        except (BuildError, ValueError) as err:
            raise ReconcileError(c.REASON_BUILD_FAILED, str(err)) from err
        except Exception as err:  # pure code: a crash on this TrainJob's input is this TrainJob's failure
            raise ReconcileError(c.REASON_BUILD_FAILED, describe(err)) from err
        trainer = info.ancestor(c.ANCESTOR_TRAINER)
        for obj in objects:
            if obj["kind"] == c.JOBSET_KIND and observed.jobset is not None:
                if (observed.jobset.get("metadata") or {}).get("deletionTimestamp"):
                    continue  # being deleted for a rebuild: its DELETED event brings the TrainJob back
                if needs_rebuild(obj, observed.jobset):
                    # Resized while suspended: JobSet keeps replicatedJobs immutable, so the JobSet is deleted
                    # (foreground: its Jobs go first, so the new one's Jobs cannot collide with them) and built
                    # again at the new size once it is gone. Secrets and the snapshot stay.
                    # Only the version read (uid and resourceVersion preconditions): a cache view that is stale
                    # (the JobSet resumed meanwhile, by another replica before a failover) deletes nothing.
                    log.info("TrainJob resized; re-creating the JobSet", namespace=job.namespace, name=job.name)
                    meta = observed.jobset.get("metadata") or {}
                    await self._write("delete", self.client.delete(
                        c.JOBSET_API_VERSION, c.JOBSET_KIND, job.name, job.namespace, propagation="Foreground",
                        uid=meta.get("uid"), resource_version=meta.get("resourceVersion")))
                    continue
            if obj["kind"] == c.JOBSET_KIND:
                applied = await self._apply_jobset(obj, observed, bool(job.spec.suspend))
                if applied is None:  # kept as it is (see _apply_jobset): the resume, or its watch event, comes back
                    continue
            else:
                applied = await self._apply(obj)
            kind, uid = obj["kind"], job.metadata.uid or ""
            if kind == c.JOBSET_KIND:
                self.store.jobsets.put(applied)
                if uid not in self.store.known.created_seen and job.metadata.creation_timestamp:
                    self.store.known.created_seen.add(uid)
                    created = dt.datetime.fromisoformat(job.metadata.creation_timestamp.replace("Z", "+00:00"))
                    self.metrics.create_to_jobset_seconds.observe(max((now - created).total_seconds(), 0.0))
            elif kind == "Secret":
                self.store.known.mpi_secrets.add(uid)
            elif kind == c.POD_GROUP_KIND:
                self.store.known.pod_groups.add(uid)
        return trainer.count if trainer is not None else None

    async def _apply_jobset(self, obj: dict[str, Any], observed: Observed, suspended: bool) -> dict[str, Any] | None:
        """Apply the JobSet. One that JobSet refuses as immutable is rebuilt when it is suspended and never ran, and
        only when the TrainJob resumes (docs/compatibility.md D24): while the TrainJob stays suspended it is kept as
        it is (None), so taking over another controller's suspended JobSets re-creates nothing. The delete carries
        the uid and resourceVersion read: a stale cache view (resumed meanwhile) deletes nothing (None)."""
        try:
            applied: dict[str, Any] = await self._write("apply", self.client.apply(obj, c.FIELD_MANAGER, force=True))
            return applied
        except ApiError as err:
            name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
            if not (err.status in (403, 422) and "immutable" in err.message and rebuildable(observed.jobset)):
                raise ReconcileError(c.REASON_APPLY_FAILED,
                                     f"failed to apply JobSet {namespace}/{name}: {err.message}") from err
            if suspended:
                log.info("suspended JobSet of an older shape refuses the update and never ran: kept until the "
                         "TrainJob resumes", namespace=namespace, name=name)
                return None
            log.info("suspended JobSet of an older shape refuses the update and never ran: rebuilding it on resume",
                     namespace=namespace, name=name, error=err.message[:300])
            meta = (observed.jobset or {}).get("metadata") or {}
            deleted = await self._write("delete", self.client.delete(
                c.JOBSET_API_VERSION, c.JOBSET_KIND, name, namespace, uid=meta.get("uid"),
                resource_version=meta.get("resourceVersion")))
            if not deleted:
                log.info("JobSet changed since it was read: not rebuilt", namespace=namespace, name=name)
                return None
        return await self._apply(obj)

    async def _apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["kind"] == "Secret":  # the MPI SSH Secret (immutable) and the Flux curve Secret: created once
            try:
                created: dict[str, Any] = await self._write("create", self.client.create(obj, c.FIELD_MANAGER))
                return created
            except ApiError as err:
                if err.conflict:
                    return obj
                what = f"Secret {obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
                raise ReconcileError(c.REASON_APPLY_FAILED, f"failed to create {what}: {err.message}") from err
        try:
            applied: dict[str, Any] = await self._write("apply", self.client.apply(obj, c.FIELD_MANAGER, force=True))
            return applied
        except ApiError as err:
            what = f"{obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}"
            raise ReconcileError(c.REASON_APPLY_FAILED, f"failed to apply {what}: {err.message}") from err

    async def _write(self, verb: str, call: Any) -> Any:
        if not self.may_write():
            call.close()  # the request coroutine is never started
            raise NotLeading(verb)
        self.writes[verb] = self.writes.get(verb, 0) + 1
        return await call

    async def _write_status(self, job: TrainJob, status: TrainJobStatus) -> None:
        before = job.status.to_wire() if job.status is not None else {}
        after = status.to_wire()
        if before == after:
            return
        if not before and set(after) <= {"state", "nodes", "startTime", "restarts"} and \
                after.get("state") == c.STATE_PENDING and not after.get("restarts"):
            # Nothing to report yet: the first real change (the JobSet's own status) carries the state, so a
            # never-suspended TrainJob costs no more writes than upstream's.
            return
        patch: dict[str, Any] = {k: after.get(k) for k in set(before) | set(after) if before.get(k) != after.get(k)}
        try:
            updated = await self._write("status", self.client.merge_patch(
                c.API_VERSION, c.TRAINJOB_KIND, job.name, job.namespace, {"status": patch}, subresource="status"))
        except ApiError as err:
            if err.not_found:
                return
            raise
        self.store.trainjobs.put(updated)

    async def _event(self, job: TrainJob, err: ReconcileError) -> None:
        """One Warning per distinct failure (upstream's reason and note), not one per retry."""
        uid = job.metadata.uid or ""
        if self.store.known.last_error.get(uid) == err.message:
            return
        self.store.known.last_error[uid] = err.message
        note = f"TrainJob resources reconciliation failed: {err.message}"
        if len(note) > EVENT_MESSAGE_LIMIT:
            note = note[:EVENT_MESSAGE_LIMIT] + " ..."
        stamp = self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{job.name}.", "namespace": job.namespace},
            "involvedObject": {"apiVersion": c.API_VERSION, "kind": c.TRAINJOB_KIND, "name": job.name,
                               "namespace": job.namespace, "uid": job.metadata.uid},
            "reason": c.EVENT_RESOURCES_CREATION_FAILED, "message": note, "type": "Warning",
            "action": "Reconciling", "reportingComponent": "trainer-trainjob-controller",
            "reportingInstance": "trainjob-operator", "source": {"component": "trainer-trainjob-controller"},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self._write("event", self.client.create(event))
        except ApiError as event_err:
            log.warning("cannot record event", error=str(event_err))
