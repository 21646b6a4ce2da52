"""JobSet: builds the JobSet from the Info, validates runtime patches and initializers, maps status back."""

from datetime import datetime
from typing import Any, ClassVar

from ...api import constants as c
from ...api.core import EnvVar, ObjectMeta
from ...api.jobset_types import ReplicatedJob
from ...api.trainjob import Condition, InitializerSource, JobStatus, TrainJob, TrainJobStatus
from .. import lifecycle, names
from ..conditions import set_condition
from ..errors import FieldError, Validation, forbidden, invalid
from ..framework import (
    ChildKind,
    ComponentBuilder,
    CustomValidation,
    Manifest,
    OwnsKinds,
    RebuildsChild,
    TrainJobStatusPlugin,
)
from ..health import jobset_restarts, tally_restarts
from ..info import RuntimeInfo
from ..manifests import owner_reference
from ..observed import Observed
from ..upsert import upsert_env

PROTECTED_ENV_CONTAINERS = (c.DATASET_INITIALIZER, c.MODEL_INITIALIZER, c.NODE)
DOMAIN_PREFIXED_HINT = 'must be a domain-prefixed path (such as "acme.io/foo")'


class JobSetPlugin(ComponentBuilder, CustomValidation, TrainJobStatusPlugin, OwnsKinds, RebuildsChild):
    name: ClassVar[str] = "JobSet"

    def rebuilds(self) -> tuple[str, str]:
        return (c.JOBSET_API_VERSION, c.JOBSET_KIND)

    def rebuildable(self, obj: dict[str, Any] | None) -> bool:
        return rebuildable(obj)

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        # A running JobSet is never mutated: only apply when absent or when either side is suspended
        # (docs/upstream-behaviour.md#when-objects-are-re-applied).
        if observed.jobset is not None and not job.spec.suspend and not observed.jobset_suspended:
            return []
        jobset = build_jobset(info, job, restarts_spent(job, observed))
        stored = ((observed.jobset or {}).get("spec") or {}).get("volumeClaimPolicies")
        if stored is not None and "volumeClaimPolicies" in jobset["spec"]:
            # Immutable in JobSet, and JobSet's webhook completes it at creation (retentionPolicy, status): a
            # re-apply (suspend/resume) must send it back exactly as stored.
            jobset["spec"]["volumeClaimPolicies"] = stored
        return [jobset]

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        return Validation(
            tuple(
                _validate_initializers(info, new)
                + _validate_patches(info, old, new, observed)
                + _validate_resize(old, new, observed)
            )
        )

    def status(self, job: TrainJob, observed: Observed, now: datetime) -> TrainJobStatus:
        return jobset_status(job, observed.jobset, now)

    def kinds(self) -> list[ChildKind]:
        return [
            ChildKind(
                c.JOBSET_API_VERSION,
                c.JOBSET_KIND,
                "jobsets",
                watch=True,
                cache_spec=("suspend", "volumeClaimPolicies", "replicatedJobs", "failurePolicy"),
                purpose="the JobSet: server-side applied, watched, deleted on deadlines and rebuilds",
            )
        ]


def rebuildable(jobset: dict[str, Any] | None) -> bool:
    """Whether an existing JobSet may be deleted and created anew when it cannot be updated in place.

    JobSet refuses most changes of its replicated jobs. A JobSet built by an older operator (v2.4 added the
    Open MPI 5 `PRTE_MCA_*` env to the MPI launcher, #4029) is therefore stuck once re-applied: upstream v2.4 tells
    users to recreate such TrainJobs. A JobSet that is suspended and never ran anything has nothing to lose, so
    the operator rebuilds it instead: suspended, no restarts, no Job of it ever active, ready, succeeded or
    failed, and never resumed (JobSet's `Suspended` condition never `False`)."""
    if not jobset or not (jobset.get("spec") or {}).get("suspend"):
        return False
    status = jobset.get("status") or {}
    if status.get("restarts") or status.get("terminalState"):
        return False
    for job in status.get("replicatedJobsStatus") or []:
        if any(job.get(key) for key in ("active", "ready", "succeeded", "failed")):
            return False
    return not any(
        cond.get("type") == "Suspended" and cond.get("status") == "False" for cond in status.get("conditions") or []
    )


def _initializer_env(container_env: list[EnvVar] | None, source: InitializerSource) -> list[EnvVar]:
    env = []
    if source.storage_uri is not None:
        env.append(EnvVar(name=c.STORAGE_URI_ENV, value=source.storage_uri))
    return env + list(source.env or [])


def _apply_initializer(rjob: ReplicatedJob, container_name: str, source: InitializerSource | None) -> None:
    spec = rjob.template.spec.template.spec
    if source is None or spec is None:
        return
    for container in spec.containers:
        if container.name != container_name:
            continue
        upsert_env(container, _initializer_env(container.env, source))
        if source.secret_ref is not None:
            container.env_from = [*(container.env_from or []), {"secretRef": {"name": source.secret_ref.name}}]


def restarts_spent(job: TrainJob, observed: Observed) -> int:
    """Restarts used before the JobSet being built: as recorded on the existing JobSet (re-applies send the same
    value), or the TrainJob's count when a JobSet is created (again)."""
    if observed.jobset is not None:
        return lifecycle.restarts_before(observed.jobset)
    return jobset_restarts(job.status)


def build_jobset(info: RuntimeInfo, job: TrainJob, restarts_before: int = 0) -> Manifest:
    """The JobSet of docs/upstream-behaviour.md#the-jobset from an Info that every other plugin has already enforced.
    A JobSet created after
    `restarts_before` restarts gets only the rest of the runtime's `maxRestarts` budget (issue 13)."""
    trainer = job.spec.trainer
    initializer = job.spec.initializer
    launcher_as_node = bool(info.ml_policy and info.ml_policy.mpi and info.ml_policy.mpi.run_launcher_as_node)
    for pod_set in info.pod_sets:
        rjob = pod_set.job
        rjob.template.spec.parallelism = pod_set.count
        rjob.template.spec.completions = pod_set.count
        if pod_set.ancestor == c.DATASET_INITIALIZER:
            rjob.replicas = 1
            _apply_initializer(rjob, c.DATASET_INITIALIZER, initializer.dataset if initializer else None)
        elif pod_set.ancestor == c.MODEL_INITIALIZER:
            rjob.replicas = 1
            _apply_initializer(rjob, c.MODEL_INITIALIZER, initializer.model if initializer else None)
        elif pod_set.ancestor == c.ANCESTOR_TRAINER:
            rjob.replicas = 1
            node = pod_set.container(c.NODE)
            if node is not None and trainer is not None:
                if trainer.image:
                    node.image = trainer.image
                if info.trainer_command is not None:
                    node.command = list(info.trainer_command)
                if info.trainer_args is not None:
                    node.args = list(info.trainer_args)
                if trainer.env:
                    upsert_env(node, trainer.env)
        if launcher_as_node and pod_set.name == c.NODE and trainer is not None and trainer.env:
            node = pod_set.container(c.NODE)
            if node is not None:
                upsert_env(node, trainer.env)
        if pod_set.jobs > 1:  # cut into bounded Jobs (issue 37): `count` is the pods of them all
            rjob.replicas = pod_set.jobs
            rjob.template.spec.parallelism = rjob.template.spec.completions = pod_set.count // pod_set.jobs
        if info.scheduler.pod_labels or info.scheduler.pod_annotations:
            template = rjob.template.spec.template
            meta = template.metadata if template.metadata is not None else ObjectMeta()
            if info.scheduler.pod_labels:
                meta.labels = {**(meta.labels or {}), **info.scheduler.pod_labels}
            if info.scheduler.pod_annotations:
                meta.annotations = {**(meta.annotations or {}), **info.scheduler.pod_annotations}
            template.metadata = meta
    info.template.suspend = bool(job.spec.suspend)
    annotations = dict(info.annotations)
    policy = info.template.failure_policy
    if restarts_before > 0:
        annotations[c.RESTARTS_BEFORE_ANNOTATION] = str(restarts_before)
        if policy is not None and policy.max_restarts is not None:
            policy.max_restarts = lifecycle.remaining_restarts(policy.max_restarts, restarts_before)
    metadata: dict[str, Any] = {"name": job.name, "namespace": job.namespace}
    if info.labels:
        metadata["labels"] = dict(info.labels)
    if annotations:
        metadata["annotations"] = annotations
    metadata["ownerReferences"] = [owner_reference(job)]
    return {
        "apiVersion": c.JOBSET_API_VERSION,
        "kind": c.JOBSET_KIND,
        "metadata": metadata,
        "spec": info.template.to_wire(),
    }


def _validate_initializers(info: RuntimeInfo, job: TrainJob) -> list[FieldError]:
    initializer = job.spec.initializer
    if initializer is None:
        return []
    errors = []
    ref = job.spec.runtime_ref.to_wire()
    for source, name, config in (
        (initializer.dataset, c.DATASET_INITIALIZER, "datasetConfig"),
        (initializer.model, c.MODEL_INITIALIZER, "modelConfig"),
    ):
        if source is None:
            continue
        pod_set = info.pod_set(name)
        if pod_set is None:
            errors.append(
                invalid("spec.runtimeRef", ref, f"must have {name} job when trainJob is configured with input {config}")
            )
            continue
        if pod_set.container(name, include_init=True) is None:
            errors.append(invalid("spec.runtimeRef", ref, f"must have container with name - {name} in the {name} job"))
            continue
        # Upstream finds the container among init containers too, but looks for the mount on regular ones only.
        container = pod_set.container(name)
        if container is None or not any(m.name == c.INITIALIZER_VOLUME for m in container.volume_mounts or []):
            errors.append(
                invalid(
                    "spec.runtimeRef",
                    ref,
                    f"must have volumeMount with name - {c.INITIALIZER_VOLUME} in container {name} of the {name} job",
                )
            )
    return errors


def domain_prefixed_path_errors(path: str, value: str) -> list[FieldError]:
    """apimachinery's IsDomainPrefixedPath: `<DNS-1123 subdomain>/<non-empty HTTP path>`."""
    host, sep, rest = value.partition("/")
    if not sep or not rest:
        return [invalid(path, value, DOMAIN_PREFIXED_HINT)]
    errors = []
    if len(host) > 253:
        errors.append(invalid(path, host, "must be no more than 253 characters"))
    if not names.DNS1123_SUBDOMAIN.fullmatch(host):
        errors.append(invalid(path, host, names.DNS1123_SUBDOMAIN_MESSAGE))
    if not names.HTTP_PATH.fullmatch(rest):
        errors.append(invalid(path, rest, names.INVALID_PATH_MESSAGE))
    return errors


def _patch_without_time(job: TrainJob | None) -> list[dict[str, Any]]:
    if job is None:
        return []
    return [{k: v for k, v in p.to_wire().items() if k != "time"} for p in job.spec.runtime_patches or []]


def _validate_patches(info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> list[FieldError]:
    errors: list[FieldError] = []
    if old is not None and _patch_without_time(old) != _patch_without_time(new):
        if not old.spec.suspend and not new.spec.suspend:
            errors.append(
                forbidden(
                    "spec.runtimePatches",
                    "RuntimePatches can only be modified when the TrainJob is suspended before or after the update",
                )
            )
        elif observed.jobset is not None:
            for status in (observed.jobset.get("status") or {}).get("replicatedJobsStatus") or []:
                if status.get("active", 0) > 0:
                    errors.append(
                        forbidden(
                            "spec.runtimePatches",
                            f"RuntimePatches cannot be modified when the JobSet's ReplicatedJob "
                            f"{status.get('name')} is still active",
                        )
                    )
    runtime_jobs = {rj.name: rj for rj in info.runtime.spec.template.spec.replicated_jobs}
    patches = new.spec.runtime_patches or []
    every_patch = [p.to_wire() for p in patches]

    def bad(detail: str) -> None:
        errors.append(invalid("spec.runtimePatches", every_patch, detail))

    for patch in patches:
        errors += domain_prefixed_path_errors("spec.runtimePatches.manager", patch.manager)
        template = patch.training_runtime_spec.template if patch.training_runtime_spec else None
        for rjob in (template.spec.replicated_jobs or []) if template and template.spec else []:
            runtime_job = runtime_jobs.get(rjob.name)
            if runtime_job is None:
                bad("must not have replicated job that doesn't exist in the runtime job template")
                continue
            pod = runtime_job.template.spec.template.spec
            names = (
                ({ct.name for ct in pod.containers} | {ct.name for ct in pod.init_containers or []}) if pod else set()
            )
            pod_patch = (
                rjob.template.spec.template.spec
                if rjob.template and rjob.template.spec and rjob.template.spec.template
                else None
            )
            if pod_patch is None:
                continue
            for container in pod_patch.init_containers or []:
                if container.name not in names:
                    bad(f"must not have initContainer that doesn't exist in the runtime job {rjob.name}")
            for container in pod_patch.containers or []:
                if container.name not in names:
                    bad(f"must not have container that doesn't exist in the runtime job {rjob.name}")
                elif container.env and container.name in PROTECTED_ENV_CONTAINERS:
                    bad("must not have envs for the dataset-initializer, model-initializer, node containers")
    return errors


def _validate_resize(old: TrainJob | None, new: TrainJob, observed: Observed) -> list[FieldError]:
    """Resize while suspended (issue 13): the CRD rule (rules.RESIZE_WHILE_SUSPENDED) admits it only when the stored
    TrainJob is suspended; the webhook also waits until the suspended JobSet's pods are gone, as for runtime
    patches."""
    if old is None or not old.spec.suspend:
        return []
    errors: list[FieldError] = []
    for path in lifecycle.resize_fields_changed(old, new):
        for status in ((observed.jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []:
            if status.get("active", 0) > 0:
                errors.append(
                    forbidden(
                        path, f"cannot be changed while the JobSet's ReplicatedJob {status.get('name')} is still active"
                    )
                )
    return errors


def jobset_status(job: TrainJob, jobset: dict[str, Any] | None, now: datetime) -> TrainJobStatus:
    """Complete/Failed copied from the JobSet (type renamed), jobsStatus mirrored
    (docs/upstream-behaviour.md#status)."""
    status = job.status.model_copy(deep=True) if job.status is not None else TrainJobStatus()
    if jobset is None:
        return status
    conditions = list(status.conditions or [])
    for condition in (jobset.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        renamed = {
            c.JOBSET_CONDITION_COMPLETED: c.CONDITION_COMPLETE,
            c.JOBSET_CONDITION_FAILED: c.CONDITION_FAILED,
        }.get(condition.get("type", ""))
        if renamed is None:
            continue
        set_condition(conditions, Condition.model_validate({**condition, "type": renamed}), now)
    status.conditions = conditions or None
    tally_restarts(status, lifecycle.total_restarts(jobset_restarts(status), jobset), None, None)
    replicated = (jobset.get("status") or {}).get("replicatedJobsStatus")
    status.jobs_status = (
        [
            JobStatus(
                name=r["name"],
                ready=r.get("ready", 0),
                succeeded=r.get("succeeded", 0),
                failed=r.get("failed", 0),
                active=r.get("active", 0),
                suspended=r.get("suspended", 0),
            )
            for r in replicated
        ]
        if replicated
        else None
    )
    return status
