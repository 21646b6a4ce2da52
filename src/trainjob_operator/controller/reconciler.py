"""Executes the plan of one TrainJob (`runtime/plan.py`): reads what exists, sends the writes, records them.

No kopf here: the handlers feed the store and the queue, the queue calls `Reconciler.reconcile`. No decision here
either: every branch below asks `plan`.
"""

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from ..api import constants as c
from ..api.runtime import RunPolicy
from ..api.trainjob import TrainJob, TrainJobStatus
from ..k8s.client import JSON_PATCH, MERGE, ApiError, KubeClient
from ..keys import FRESH_KEYS
from ..logs import get
from ..metrics import Metrics
from ..runtime import elastic, goodput, kueue, plan
from ..runtime.conditions import rfc3339
from ..runtime.errors import BuildError, printable
from ..runtime.health import PodWarning, warning_event
from ..runtime.identity import own
from ..runtime.info import RuntimeSource
from ..runtime.lifecycle import check_startup, effective_run_policy
from ..runtime.observed import ObjectRef, Observed, StatusEndpoint
from ..runtime.pipeline import Framework
from ..runtime.plan import Blocked, Failure, Stage
from ..runtime.snapshot import build_snapshot, runtime_from_snapshot, snapshot_name
from ..runtime.status import StatusOutcome
from .runtimes import RuntimeResolver
from .store import Key, Store

log = get("trainjob_operator.reconciler")


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
    client: KubeClient
    store: Store
    framework: Framework
    metrics: Metrics
    clock: Callable[[], dt.datetime] = utcnow
    status_server: Callable[[], StatusEndpoint | None] = lambda: None
    """Where trainer pods report progress (None: the status server is off and nothing is injected)."""
    may_write: Callable[[], bool] = lambda: True
    """Checked before every write: a replica whose Lease lapsed mid-pass writes nothing (no split brain)."""
    runtimes: RuntimeResolver | None = None
    """The runtime lookup shared with the webhooks (one is made from the client and store when not given)."""

    def __post_init__(self) -> None:
        if self.runtimes is None:
            self.runtimes = RuntimeResolver(self.client, self.store, self.framework.runtime_models())

    async def lookup_runtime(self, kind: str, namespace: str, name: str) -> RuntimeSource | None:
        assert self.runtimes is not None
        return await self.runtimes.lookup(kind, namespace, name)

    # --- the reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> Result:
        started = time.perf_counter()
        result = Result(error=True)
        body = self.store.trainjobs.get(key)
        try:
            if body is None:
                result = Result()
                return result
            result = await self._reconcile(key, body)
            return result
        finally:
            self._forget_if_gone(key, body)
            self.metrics.reconcile_seconds.labels(result="error" if result.error else "ok").observe(
                time.perf_counter() - started
            )

    def _forget_if_gone(self, key: Key, body: dict[str, Any] | None) -> None:
        """The TrainJob was deleted (or replaced) while its pass ran: the DELETED event forgot its uid before the
        pass recorded what it did; forgotten again, or it stays for the process's life (memory bounded)."""
        uid = ((body or {}).get("metadata") or {}).get("uid")
        if not uid:
            return
        now = self.store.trainjobs.get(key)
        if now is None or (now.get("metadata") or {}).get("uid") != uid:
            self.store.known.forget(uid)

    async def _reconcile(self, key: Key, body: dict[str, Any]) -> Result:
        try:
            job = TrainJob.model_validate(body)
        except ValidationError as err:  # the API server validated it; an older CRD may let odd objects in
            log.error("TrainJob does not parse; skipped", namespace=key[0], name=key[1], error=str(err))
            return Result()
        if plan.ignored(job, body):
            return Result()
        bound = log.bind(namespace=job.namespace, name=job.name, uid=job.metadata.uid)
        now = self.clock()
        uid = job.metadata.uid or ""
        failure: Failure | None = None
        wait: plan.Waiting | None = None
        nodes: int | None = job.status.nodes if job.status is not None else None
        policy = await self._run_policy(job)
        stage = plan.stage(job, self.store.jobsets.get(key))
        outcome: StatusOutcome
        if stage is Stage.FINISHED:
            outcome, failure = self._status(job, now, policy)
        elif stage is Stage.UNSUPPORTED:
            outcome = plan.unsupported(job, now)
        else:
            try:
                if stage is Stage.BUILD:
                    nodes = await self._build_and_write(job, now)
                    if nodes is not None:
                        self.store.known.of(uid).nodes = nodes
                elif (known := self.store.known.get(uid)) is not None and known.nodes is not None:
                    nodes = known.nodes
                if (known := self.store.known.get(uid)) is not None:
                    known.last_error = None
            except Blocked as blocked:
                wait = await self._wait(job, blocked, now)
            except Failure as err:
                failure = err
                self.metrics.apply_errors.labels(reason=err.reason).inc()
                bound.warning("reconcile failed", reason=err.reason, error=err.message)
                await self._event(job, err)
            outcome, status_failure = self._status(job, now, policy)
            failure = failure or status_failure
            if outcome.check_startup:
                outcome = await self._check_startup(job, outcome, policy, now)
            if outcome.delete_jobset:
                delete = plan.delete_jobset(job, own(job, self.store.jobsets.get(key)))
                if delete is not None:
                    bound.info("deadline exceeded; deleting the JobSet")
                    await self._send(delete)
                    self.store.jobsets.remove(key)
        if outcome.delete_trainjob:
            bound.info(
                "TTL after finished expired; deleting the TrainJob",
                completion_time=outcome.status.completion_time,
                ttl_seconds_after_finished=policy.ttl_seconds_after_finished,
            )
            await self._send(plan.delete_trainjob(job))
            self.metrics.ttl_deletions.inc()
            return Result()
        jobset = own(job, self.store.jobsets.get(key))  # a predecessor's JobSet and pods say nothing of this one
        pods = self.store.pods.of_jobset(key) if self.store.pods is not None else None
        stopped = await self._why_kueue_stopped(job)
        status, warnings = plan.observed_status(job, outcome, failure, nodes, now, jobset, pods, stopped)
        status = plan.pending(status, wait, now)
        if stage is Stage.RUNNING:  # an elastic TrainJob's size (runtime/elastic.py)
            status, resized = await self._elastic(job, jobset, pods, status, now)
            requeue_after = outcome.requeue_after
            if resized is not None:
                outcome = replace(outcome, requeue_after=min(requeue_after, resized) if requeue_after else resized)
        watched = plan.watch_progress(job, status, policy, jobset, now)  # stalls and goodput (issue 35)
        await self._pod_warnings(job, warnings + watched.warnings)
        written = await self._write_status(job, watched.status, (body.get("metadata") or {}).get("resourceVersion"))
        if written is not False:
            self._record_goodput(job, watched, written)
            if watched.delete is not None:  # recorded first: a restart is never sent twice, never counted twice
                bound.info("TrainJob stalled; deleting its JobSet", action=watched.stalled or "Restart")
                await self._send(watched.delete)
                if watched.stalled == "Fail":  # a restart's JobSet stays cached until gone: no build before
                    self.store.jobsets.remove(key)
        requeue = outcome.requeue_after
        if watched.requeue_after is not None:
            requeue = min(requeue, watched.requeue_after) if requeue else watched.requeue_after
        if wait is not None:
            requeue = min(requeue, wait.requeue_after) if requeue else wait.requeue_after
        return Result(requeue_after=requeue, error=failure is not None)

    async def _elastic(
        self, job: TrainJob, jobset: dict[str, Any] | None, pods: Any, status: TrainJobStatus, now: dt.datetime
    ) -> tuple[TrainJobStatus, float | None]:
        """Resize an elastic TrainJob's JobSet as `elastic.decide` says, with one Event per resize; a refusal (the
        ElasticJobSet gate is off) leaves it fixed-size, said once; below minNodes too long, it fails and its
        JobSet goes."""
        decision = elastic.decide(job, jobset, list(pods) if pods is not None else None, now)
        if decision is None:
            return status, None
        event: dict[str, Any] | None = None
        if decision.resize is not None:
            resize = decision.resize
            try:
                await self._write(
                    "patch",
                    self.client.patch(
                        c.JOBSET_API_VERSION, c.JOBSET_KIND, job.name, job.namespace, resize.patch, JSON_PATCH
                    ),
                )
                log.info("elastic resize", namespace=job.namespace, name=job.name, size=resize.size, was=resize.before)
                event = plan.event_body(job, resize.reason, resize.message, "Normal", "Resizing", now)
            except ApiError as err:
                if err.status in (400, 403, 422) and "immutable" in err.message:
                    decision = elastic.refused(job, decision, err.message)
                    event = plan.event_body(
                        job, c.EVENT_ELASTIC_UNAVAILABLE, decision.status.message or "", "Warning", "Resizing", now
                    )
                else:  # a stale view (the uid test failed) or an outage: decided again on the next pass
                    log.warning("elastic resize failed", namespace=job.namespace, name=job.name, error=str(err))
                    return status, 1.0
        events = [event] if event is not None else []
        if decision.moved is not None:  # the rendezvous Service is made again, selecting the new index
            moved = await self._move_rendezvous(job, *decision.moved, now)
            if moved is None:  # not deleted: the status keeps the index the Service selects, decided again soon
                kept = decision.status.model_copy(update={"rendezvous_index": decision.moved[0]})
                decision = replace(decision, status=kept, moved=None)
            else:
                events.append(moved)
            decision = replace(decision, requeue_after=min(decision.requeue_after or 1.0, 1.0))
        for body in events:
            try:
                await self._write("event", self.client.create(body))
            except ApiError as err:
                log.warning("cannot record event", error=str(err))
        if decision.failed is not None:
            delete = plan.delete_jobset(job, jobset)
            if delete is not None:
                await self._send(delete)
                self.store.jobsets.remove((job.namespace, job.name))
        return elastic.with_elastic(status, decision, now), decision.requeue_after

    async def _move_rendezvous(self, job: TrainJob, was: int, index: int, now: dt.datetime) -> dict[str, Any] | None:
        """Delete the rendezvous Service and create it again selecting `index` (the build makes it once, before the
        JobSet runs); the Event that says so (None: not moved, decided again on the next pass)."""
        name = elastic.rendezvous_service(job.name)
        try:
            found = await self.client.get("v1", "Service", name, job.namespace)
            if found is not None:
                if own(job, found) is None:  # not this TrainJob's: never deleted (the build reports a stranger)
                    log.warning("elastic rendezvous Service is not this TrainJob's", namespace=job.namespace, name=name)
                    return None
                uid = (found.get("metadata") or {}).get("uid")
                try:
                    await self._send(plan.Delete("v1", "Service", name, job.namespace, uid=uid))
                except ApiError as err:
                    if err.status != 404:
                        raise
            await self._send(plan.Create(elastic.rendezvous_manifest(job, index)))
        except ApiError as err:
            log.warning("cannot move the elastic rendezvous", namespace=job.namespace, name=job.name, error=str(err))
            return None
        log.info("elastic rendezvous moved", namespace=job.namespace, name=job.name, was=was, index=index)
        message = (
            f"the rendezvous moved from index {was} to index {index}: what ran at index {was} is gone; the agents "
            f"rendezvous again on the store of index {index}'s pod"
        )
        return plan.event_body(job, c.EVENT_ELASTIC_RENDEZVOUS_MOVED, message, "Normal", "Resizing", now)

    async def _why_kueue_stopped(self, job: TrainJob) -> tuple[str, str] | None:
        """A suspended TrainJob queued in Kueue: the reason on its Workload (one LIST by the TrainJob's uid label).
        Without Kueue or without the permission it stays unexplained (the Suspended condition still says it)."""
        if not kueue.asks_why(job):
            return None
        try:
            workloads = await self.client.list(
                kueue.WORKLOAD_API_VERSION, kueue.WORKLOAD_KIND, job.namespace, kueue.workload_selector(job)
            )
        except ApiError as err:
            log.debug("cannot read Kueue's Workload", namespace=job.namespace, name=job.name, error=str(err))
            return None
        return kueue.why_stopped(workloads, job.metadata.uid or "")

    async def _wait(self, job: TrainJob, blocked: Blocked, now: dt.datetime) -> plan.Waiting:
        """Objects under this TrainJob's child names are not its own: delete the predecessor's (only those
        incarnations), record why it waits (one Event per change of the wait), and look again with backoff."""
        wait = plan.waiting(job, blocked.strangers, now)
        uid = job.metadata.uid or ""
        self.metrics.identity_waits.labels(reason=wait.reason).inc()
        log.info(
            "waiting for objects that are not this TrainJob's",
            namespace=job.namespace,
            name=job.name,
            uid=uid,
            reason=wait.reason,
            objects=[s.describe(job.namespace) for s in blocked.strangers],
        )
        for delete in wait.deletes:
            try:
                await self._send(delete)
            except ApiError as err:  # looked at again on the next pass
                log.warning("cannot delete a previous TrainJob's object", object=delete.name, error=str(err))
        known = self.store.known.get(uid)
        event = plan.waiting_event(job, wait, known.last_error if known is not None else None, now)
        if event is not None:
            self.store.known.of(uid).last_error = wait.message
            try:
                await self._write("event", self.client.create(event))
            except ApiError as err:
                log.warning("cannot record event", error=str(err))
        return wait

    def _status(self, job: TrainJob, now: dt.datetime, policy: RunPolicy) -> tuple[StatusOutcome, Failure | None]:
        outcome, failure = plan.status(
            self.framework, job, self.store.jobsets.get((job.namespace, job.name)), now, policy
        )
        if failure is not None:
            log.warning("status step failed", namespace=job.namespace, name=job.name, error=failure.message)
        return outcome, failure

    async def _run_policy(self, job: TrainJob) -> RunPolicy:
        """The effective run policy: the TrainJob's fields over its runtime's `runPolicy` defaults. The runtime is
        the snapshot in force when known, else the live one (watch cache, read through), else the snapshot read
        back (the runtime was deleted); an unreadable runtime contributes no defaults."""
        known = self.store.known.get(job.metadata.uid or "")
        source = known.snapshot if known is not None else None
        ref = job.spec.runtime_ref
        if source is None and plan.supported(job):
            try:
                source = await self.lookup_runtime(ref.kind or c.CLUSTER_TRAINING_RUNTIME_KIND, job.namespace, ref.name)
                if source is None:
                    configmap = await self.client.get("v1", "ConfigMap", snapshot_name(job), job.namespace)
                    source = (
                        runtime_from_snapshot(job, configmap, self.framework.runtime_models())
                        if configmap is not None
                        else None
                    )
            except (ApiError, ValidationError, BuildError) as err:
                log.warning(
                    "cannot read the runtime's run policy", namespace=job.namespace, name=job.name, error=str(err)
                )
        return effective_run_policy(job, source.spec.run_policy if source is not None else None)

    async def _check_startup(
        self, job: TrainJob, outcome: StatusOutcome, policy: RunPolicy, now: dt.datetime
    ) -> StatusOutcome:
        """The startup deadline passed: list the pods (once they all started, never again) and let the plan judge."""
        uid = job.metadata.uid or ""
        known = self.store.known.get(uid)
        if known is not None and known.started:
            return outcome
        jobset_uid = ((own(job, self.store.jobsets.get((job.namespace, job.name))) or {}).get("metadata") or {}).get(
            "uid"
        )
        if not jobset_uid:  # no JobSet of its own (yet): nothing of this TrainJob's can be stuck
            return plan.pods_unreadable(outcome)
        try:  # this JobSet's pods only: a predecessor's pod under the same JobSet name never fails this TrainJob
            pods = await self.client.list(
                "v1",
                "Pod",
                job.namespace,
                label_selector=f"{c.JOBSET_NAME_LABEL}={job.name},{c.JOBSET_UID_LABEL}={jobset_uid}",
            )
        except ApiError as err:
            log.warning(
                "cannot list pods for the startup deadline", namespace=job.namespace, name=job.name, error=str(err)
            )
            return plan.pods_unreadable(outcome)
        check = check_startup(pods)
        if check.stuck is not None:
            log.info(
                "startup deadline exceeded",
                namespace=job.namespace,
                name=job.name,
                pod=check.stuck.name,
                reason=check.stuck.reason,
            )
            self.metrics.startup_failures.labels(reason=check.stuck.reason).inc()
        elif check.started:
            self.store.known.of(uid).started = True
        return plan.after_startup_check(outcome, check, policy, now)

    async def _runtime_for(self, job: TrainJob) -> RuntimeSource:
        """The snapshot in force; created from the live runtime on the first build (docs/upstream-behaviour.md, "When objects are re-applied").

        The snapshot is created with a plain create (one request): a conflict means it exists, and only then is it
        read and checked. A runtime deleted after the snapshot was taken does not matter.
        """
        uid = job.metadata.uid or ""
        known = self.store.known.get(uid)
        if known is not None and known.snapshot is not None:
            return known.snapshot
        ref = job.spec.runtime_ref
        kind = ref.kind or c.CLUSTER_TRAINING_RUNTIME_KIND
        try:
            live = await self.lookup_runtime(kind, job.namespace, ref.name)
        except (ApiError, ValidationError) as err:
            raise Failure(c.REASON_RUNTIME_NOT_FOUND, f"cannot read {kind} {ref.name}: {err}") from err
        source: RuntimeSource | None = None
        if live is not None:
            try:
                await self._write("create", self.client.create(build_snapshot(job, live), c.FIELD_MANAGER))
                source = live
            except ApiError as err:
                if not err.conflict:
                    raise Failure(c.REASON_APPLY_FAILED, f"cannot create the runtime snapshot: {err.message}") from err
        if source is None:
            try:
                configmap = await self.client.get("v1", "ConfigMap", snapshot_name(job), job.namespace)
            except ApiError as err:
                raise Failure(c.REASON_APPLY_FAILED, f"cannot read the runtime snapshot: {err}") from err
            # Checks owner and runtimeRef every time; parsed with the framework's runtime models.
            fresh = plan.snapshot_source(job, configmap, self.framework.runtime_models())
            text = str(((configmap or {}).get("data") or {}).get("runtime"))
            return self.store.known.shared_source(uid, text, fresh)  # one parsed runtime per distinct snapshot
        self.store.known.of(uid).snapshot = source
        return source

    def _observed(self, job: TrainJob, read: dict[ObjectRef, dict[str, Any] | None] | None = None) -> Observed:
        return Observed(
            jobset=self.store.jobsets.get((job.namespace, job.name)),
            existing=self.store.known.exists(job.metadata.uid or ""),
            read=read or {},
            status_server=self.status_server(),
            keys=FRESH_KEYS,
        )

    async def _build_and_write(self, job: TrainJob, now: dt.datetime) -> int | None:
        runtime = await self._runtime_for(job)
        uid = job.metadata.uid or ""
        observed = self._observed(job)
        children = plan.children(self.framework, job, runtime, observed)
        made: dict[ObjectRef, tuple[dict[str, Any], dict[str, Any]]] = {}
        if children.probes:  # children not known yet: created, or read (whose are they?), then planned again
            read = await self._probe(job, children, made)
            observed = self._observed(job, read)
            if any(obj is not None for obj in read.values()):  # reads that found nothing change no write
                children = plan.children(self.framework, job, runtime, observed)  # raises Blocked for a stranger
            for ref, obj in read.items():
                if obj is not None:
                    self.store.known.add(uid, ref)
        for write in children.writes:
            if isinstance(write, plan.Delete):
                log.info("TrainJob resized; re-creating the JobSet", namespace=job.namespace, name=job.name)
                await self._send(write)
                continue
            known = self.store.known.get(uid)
            if plan.unchanged(write, known.applied if known is not None else {}):
                continue
            body, answer = made.get(plan.ref_of(write.obj), (None, None))  # created by the probe: recorded below
            written = answer if body is not None and body == write.obj else await self._send_child(job, write, observed)
            if written is None:  # kept as it is (plan.rebuild_after_refusal): a resume or a watch event comes back
                continue
            ref = plan.ref_of(write.obj)
            digest = plan.applied_digest(write)
            if digest is not None:
                self.store.known.of(uid).applied[ref] = digest
            if ref.kind != c.JOBSET_KIND:
                self.store.known.add(uid, ref)  # its own now: not read again; a created-once one is skipped
            cache = self.store.children.get((ref.api_version, ref.kind))
            if cache is not None:
                cache.put(written)
            if ref.kind == c.JOBSET_KIND and observed.jobset is None:  # one line per JobSet made
                log.info(
                    "JobSet rebuilt" if self.store.known.of(uid).jobset_made else "JobSet built",
                    namespace=job.namespace,
                    name=ref.name,
                    uid=uid,
                    nodes=children.nodes,
                    suspended=bool(job.spec.suspend),
                )
            if (
                ref.kind == c.JOBSET_KIND
                and not self.store.known.of(uid).jobset_made
                and job.metadata.creation_timestamp
            ):
                self.store.known.of(uid).jobset_made = True
                created = dt.datetime.fromisoformat(job.metadata.creation_timestamp.replace("Z", "+00:00"))
                self.metrics.create_to_jobset_seconds.observe(max((now - created).total_seconds(), 0.0))
        return children.nodes

    async def _probe(
        self, job: TrainJob, children: plan.Children, made: dict[ObjectRef, tuple[dict[str, Any], dict[str, Any]]]
    ) -> dict[ObjectRef, dict[str, Any] | None]:
        """Whether the children not known yet exist, and whose they are. Each is created with its build's body until
        one conflicts (`made` gets the body and the API server's answer: this TrainJob's, no read needed; its write
        in the plan is not sent again unless a later plan changed its body); that one and the rest are read (what
        they found: the plan judges it)."""
        read: dict[ObjectRef, dict[str, Any] | None] = {}
        creates = plan.probe_creates(children)
        for ref in children.probes:
            create = creates.get(ref) if not read else None
            if create is not None:
                try:
                    made[ref] = (create.obj, await self._send(create))
                    continue
                except ApiError as err:
                    if not err.conflict:
                        raise plan.write_failed(plan.Apply(create.obj), err.message) from err
            try:
                read[ref] = await self.client.get(ref.api_version, ref.kind, ref.name, job.namespace)
            except ApiError as err:
                raise Failure(c.REASON_APPLY_FAILED, f"cannot read existing objects: {err}") from err
        return read

    async def _send_child(
        self, job: TrainJob, write: plan.Apply | plan.Create, observed: Observed
    ) -> dict[str, Any] | None:
        """One child's write; a conflict on a create means it exists; a refused apply may be kept as it is (None)
        or rebuilt."""
        try:
            return await self._send(write)  # type: ignore[no-any-return]
        except ApiError as err:
            if isinstance(write, plan.Create) and err.conflict:
                return await self._existing(job, write.obj)
            rebuild = plan.rebuild_after_refusal(
                self.framework, write, err.status, err.message, observed, bool(job.spec.suspend)
            )
            if rebuild is None:
                raise plan.write_failed(write, err.message) from err
            name, namespace = write.obj["metadata"]["name"], write.obj["metadata"].get("namespace")
            if isinstance(rebuild, plan.Keep):
                log.info(
                    "suspended JobSet of an older shape refuses the update and never ran: kept until the "
                    "TrainJob resumes",
                    namespace=namespace,
                    name=name,
                )
                return None
            log.info(
                "suspended JobSet of an older shape refuses the update and never ran: rebuilding it on resume",
                namespace=namespace,
                name=name,
                error=err.message[:300],
            )
        if not await self._send(rebuild):
            log.info("JobSet changed since it was read: not rebuilt", namespace=namespace, name=name)
            return None
        try:
            return await self._send(write)  # type: ignore[no-any-return]
        except ApiError as err:
            raise plan.write_failed(write, err.message) from err

    async def _existing(self, job: TrainJob, obj: dict[str, Any]) -> dict[str, Any]:
        """A create conflicted: something of that name exists. Read it and let the plan judge whose it is (a
        predecessor's or a foreign object raises Blocked); this TrainJob's own is taken as created."""
        ref = plan.ref_of(obj)
        namespace = obj["metadata"].get("namespace")
        try:
            found = await self.client.get(ref.api_version, ref.kind, ref.name, namespace)
        except ApiError as err:
            raise plan.write_failed(plan.Create(obj), f"exists, and cannot be read: {err.message}") from err
        if found is None:  # gone between the create and the read: create it on the next pass
            raise plan.write_failed(plan.Create(obj), "exists, and was deleted before it could be read")
        blocking = plan.strangers(job, Observed(read={ref: found}))
        if blocking:
            raise Blocked(blocking)
        return found

    async def _send(self, write: plan.Write) -> Any:
        """One write of a plan."""
        if isinstance(write, plan.Delete):
            return await self._write(
                "delete",
                self.client.delete(
                    write.api_version,
                    write.kind,
                    write.name,
                    write.namespace,
                    propagation=write.propagation,
                    uid=write.uid,
                    resource_version=write.resource_version,
                ),
            )
        if isinstance(write, plan.Create):
            return await self._write("create", self.client.create(write.obj, c.FIELD_MANAGER))
        return await self._write("apply", self.client.apply(write.obj, c.FIELD_MANAGER, force=True))

    async def _write(self, verb: str, call: Any) -> Any:
        if not self.may_write():
            call.close()  # the request coroutine is never started
            raise NotLeading(verb)
        return await call

    def _record_goodput(self, job: TrainJob, watched: plan.ProgressWatch, written: bool | None) -> None:
        """The goodput counters and histograms (issue 35), from what a landed status write changed (`written`
        True; None: nothing to write)."""
        if not written:
            return
        labels = self.metrics.goodput_labels(job.namespace, job.spec.runtime_ref.name)
        before = job.status.goodput if job.status is not None else None
        after = watched.status.goodput
        for phase, seconds in goodput.closed_deltas(before, after).items():
            if phase == "idle":
                phase_was = before.phase if before is not None else ""
                self.metrics.idle_accelerator_seconds.labels(**labels, phase=phase_was).inc(seconds)
            else:
                self.metrics.goodput_seconds.labels(**labels, phase=phase).inc(seconds)
        if (
            after is not None
            and after.first_progress_seconds is not None
            and (before is None or before.first_progress_seconds is None)
        ):
            self.metrics.first_progress_seconds.labels(**labels).observe(after.first_progress_seconds)
        finished = after is not None and after.phase == goodput.FINISHED
        if (
            finished
            and after is not None
            and after.percent is not None
            and (before is None or before.phase != after.phase)
        ):
            self.metrics.goodput_ratio.labels(**labels).observe(after.percent / 100)
        if watched.stalled is not None:
            self.metrics.stalls.labels(**labels, action=watched.stalled).inc()

    async def _write_status(self, job: TrainJob, status: Any, version: str | None) -> bool | None:
        """True: written; None: nothing to write; False: not written (the TrainJob changed or is gone)."""
        patch = plan.status_patch(job, status)
        if patch is None:
            return None
        request = plan.status_request(job, patch, version)
        try:
            updated = await self._write(
                "status",
                self.client.patch(
                    c.API_VERSION,
                    c.TRAINJOB_KIND,
                    job.name,
                    job.namespace,
                    request.body,
                    JSON_PATCH if request.json_patch else MERGE,
                    subresource="status",
                ),
            )
        except ApiError as err:
            if err.not_found:
                return False
            refused = err.status == 422 and request.json_patch  # a JSON patch's test or remove failed
            if err.conflict or (refused and await self._replaced(job)):
                # Changed (the first write) or replaced under the same name since it was read (the uid test failed:
                # the API server answers a bare 422): the watch event of the change brings it back; this
                # incarnation's status is never written on another.
                log.info(
                    "TrainJob changed since it was read; status not written", namespace=job.namespace, name=job.name
                )
                return False
            if refused:
                # This incarnation refused it: a field the patch removes is gone, so its status changed since this
                # replica read it (a former leader's write its watch has not brought yet). That event brings the
                # TrainJob back; said as a warning, as a patch wrong in itself would be refused the same way.
                log.warning(
                    "status patch refused against an older status; written again from the next event",
                    namespace=job.namespace,
                    name=job.name,
                    error=printable(err.message)[:300],
                )
                return False
            raise
        self.store.trainjobs.put(updated)
        return True

    async def _pod_warnings(self, job: TrainJob, warnings: tuple[PodWarning, ...]) -> None:
        """One Warning Event per distinct pod failure or scheduling problem (runtime/health.py): remembered here,
        and named so that a second create (another pass, an operator restart) conflicts instead of repeating it."""
        uid = job.metadata.uid or ""
        for warning in warnings:
            if not self.store.known.warn_once(uid, warning.key):
                continue
            log.info(
                "pod warning", namespace=job.namespace, name=job.name, reason=warning.reason, message=warning.message
            )
            try:
                await self._write("event", self.client.create(warning_event(job, warning, rfc3339(self.clock()))))
            except ApiError as err:
                if not err.conflict:  # tried again on the next pass
                    if (known := self.store.known.get(uid)) is not None:
                        known.warned.discard(warning.key)
                    log.warning("cannot record event", error=str(err))

    async def _replaced(self, job: TrainJob) -> bool:
        """The TrainJob under this name is gone or is another incarnation (a JSON patch's uid test failed)."""
        current = await self.client.get(c.API_VERSION, c.TRAINJOB_KIND, job.name, job.namespace)
        return current is None or (current.get("metadata") or {}).get("uid") != job.metadata.uid

    async def _event(self, job: TrainJob, failure: Failure) -> None:
        uid = job.metadata.uid or ""
        known = self.store.known.get(uid)
        event = plan.event(job, failure, known.last_error if known is not None else None, self.clock())
        if event is None:
            return
        self.store.known.of(uid).last_error = failure.message
        try:
            await self._write("event", self.client.create(event))
        except ApiError as event_err:
            log.warning("cannot record event", error=str(event_err))
