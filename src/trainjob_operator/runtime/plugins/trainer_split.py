"""TrainerSplit (issue 37, beyond upstream, opt-in): a huge trainer cut into bounded Jobs.

A TrainJob annotated `trainer.kubeflow.org/max-nodes-per-job: "B"` whose trainer has more than B pods gets its
trainer replicated job as `replicas: K` Jobs of `parallelism` = `completions` = N / K pods each (`split.split_for`:
the fewest equal Jobs within B, none smaller than B / 4; a numNodes with no such cut, a prime say, stays one Job).
Measured at numNodes 5,000 on kwok: the last pod 23% sooner, all pods Running ~30% sooner, 16% less control-plane
CPU than one Indexed Job of 5,000 (docs/performance.md).

What the training code reads stays as it is uncut. Every variable a framework plugin set from the pod's completion
index (`PET_NODE_RANK`, `JAX_PROCESS_ID`, XGBoost's task id...) and `JOB_COMPLETION_INDEX` itself hold the pod's rank
`job index x Job size + completion index`, computed by a POSIX shell line around the container's command (`split.
rank_command`; the job index from JobSet's `jobset.sigs.k8s.io/job-index` annotation by `fieldRef`). Counts stay N
(`PET_NNODES`, `JAX_NUM_PROCESSES`, the gang's minimum, Kueue's PodSet count = replicas x parallelism), rank 0 is
still `<tj>-node-0-0` (the master address), and MPI's hostfile lists the pods in rank order (`common.pod_hosts`).

MPI cuts its `node` workers (sshd; `mpirun` ranks them by the hostfile), and wraps nothing. Refused, naming the
annotation: a value that is no positive integer up to an Indexed Job's limit; an elastic torch trainer (ranks come
from the rendezvous); a trainer container without a command (an image's entrypoint cannot be wrapped); TensorFlow
(the kubelet expands `TF_CONFIG`'s task index from the completion index) and Flux (its broker list names one Job's
pods); a runtime whose JobSet succeeds when `Any` trainer Job does (the first of K Jobs would end it); a change of
the annotation after creation.
"""

from types import MappingProxyType
from typing import ClassVar

from ...api import constants as c
from ...api.core import EnvVar
from ...api.trainjob import TrainJob
from ..errors import BuildError, FieldError, Validation, forbidden, invalid, printable
from ..framework import CustomValidation, EnforcePodSpec
from ..info import PodSet, RuntimeInfo
from ..limits import INDEXED_JOB_LIMIT
from ..observed import Observed
from ..split import COMPLETION_INDEX_ENV, JOB_INDEX_ENV, Split, rank_command, split_for
from ..upsert import upsert_env

PATH = f"metadata.annotations[{c.MAX_NODES_PER_JOB_ANNOTATION}]"
VALUE_SHOWN = 64
"""Characters of a refused value quoted back (escaped)."""
MPI = "MPI"
UNSUPPORTED = MappingProxyType(
    {
        "TensorFlow": "the kubelet expands TF_CONFIG's task index from the pod's completion index",
        "Flux": "its broker list names the pods of one Job",
    }
)
"""Trainer owners (`RuntimeInfo.trainer_owner`) whose pods learn their place some other way than a rank variable."""
KUEUE_WARNING = (
    f"{c.MAX_NODES_PER_JOB_ANNOTATION}: Kueue computes this TrainJob's JobSet as upstream builds it, with its trainer "
    "as one Job: it admits the same pod count, but its topology-aware placement does not follow the ranks, and "
    "with waitForPodsReady it never counts the trainer ready (docs/usage.md)"
)
"""Admission's warning for a cut TrainJob queued in Kueue."""


def requested(job: TrainJob) -> str | None:
    """The annotation's value as written (None: not asked)."""
    return (job.metadata.annotations or {}).get(c.MAX_NODES_PER_JOB_ANNOTATION)


def parse_bound(raw: str) -> int | None:
    """The bound, when `raw` is a positive decimal integer up to an Indexed Job's limit (bounded work: a long value
    is never parsed)."""
    text = raw.strip()
    if not text or len(text) > len(str(INDEXED_JOB_LIMIT)) or not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if 1 <= value <= INDEXED_JOB_LIMIT else None


def _shown(raw: str) -> str:
    """The value as an error quotes it: clipped (rendered as JSON, escaped again where the message is emitted)."""
    return raw if len(raw) <= VALUE_SHOWN else raw[: VALUE_SHOWN - 3] + "..."


def target(info: RuntimeInfo) -> PodSet | None:
    """The pod set that is cut: MPI's `node` workers, else the trainer."""
    return info.pod_set(c.NODE) if info.trainer_owner == MPI else info.ancestor(c.ANCESTOR_TRAINER)


def _elastic(info: RuntimeInfo, job: TrainJob) -> bool:
    torch = info.ml_policy.torch if info.ml_policy is not None else None
    own = job.spec.trainer.elastic_policy if job.spec.trainer is not None else None
    return torch is not None and (torch.elastic_policy is not None or own is not None)


def _command(info: RuntimeInfo, job: TrainJob, pod_set: PodSet) -> list[str]:
    """The trainer container's command as the JobSet would get it (the TrainJob's, else the runtime's)."""
    if job.spec.trainer is not None and job.spec.trainer.command is not None:
        return list(job.spec.trainer.command)
    node = pod_set.container(c.NODE)
    return list(node.command or []) if node is not None else []


def _ends_on_any_job(info: RuntimeInfo, pod_set: PodSet) -> bool:
    policy = info.template.success_policy
    return (
        policy is not None
        and policy.operator == "Any"
        and (not policy.target_replicated_jobs or pod_set.name in policy.target_replicated_jobs)
    )


def request_errors(info: RuntimeInfo, job: TrainJob, raw: str) -> list[FieldError]:
    """What makes the request impossible whatever numNodes is (admission and the build both check it)."""
    if parse_bound(raw) is None:
        return [
            invalid(
                PATH,
                _shown(raw),
                f"must be a positive integer, at most {INDEXED_JOB_LIMIT}: the most trainer pods one Job runs",
            )
        ]
    reasons = []
    pod_set = target(info)
    if pod_set is None:
        reasons.append("the runtime has no trainer replicated job to cut")
    elif (owner := info.trainer_owner or "") in UNSUPPORTED:
        reasons.append(f"not supported with the {owner} runtime: {UNSUPPORTED[owner]}")
    else:
        if _elastic(info, job):
            reasons.append("not supported with elastic training: the rendezvous, not the pod's index, gives the ranks")
        if info.trainer_owner != MPI and not _command(info, job, pod_set):
            reasons.append(
                "needs a command for the trainer container (spec.trainer.command or the runtime's): the image's "
                "entrypoint cannot be wrapped by the line that computes each pod's rank"
            )
        if _ends_on_any_job(info, pod_set):
            reasons.append(
                f"not supported when the runtime's successPolicy is Any over {pod_set.name}: the first of its Jobs "
                "to succeed would end the JobSet"
            )
    return [invalid(PATH, _shown(raw), reason) for reason in reasons]


def rank_names(pod_set: PodSet) -> list[str]:
    """The trainer container's variables set from the completion index (by the framework plugins), in order.
    Raises BuildError when another container of the pod reads it: only the trainer's command is wrapped."""
    names: list[str] = []
    spec = pod_set.pod_spec
    for container in [*(spec.init_containers or []), *spec.containers]:
        indexed = [e.name for e in container.env or [] if _from_completion_index(e)]
        if indexed and container.name != c.NODE:
            raise BuildError(
                f"{PATH}: the trainer's container {printable(container.name)} reads the completion index as "
                f"{', '.join(indexed)}; only the {c.NODE} container's command is wrapped to give the rank"
            )
        names += indexed
    return names


def _from_completion_index(env: EnvVar) -> bool:
    field = (env.value_from or {}).get("fieldRef") or {}
    return isinstance(field, dict) and field.get("fieldPath") == c.JOB_COMPLETION_INDEX_FIELD


def cut(info: RuntimeInfo, pod_set: PodSet, split: Split) -> None:
    """`pod_set` as `split.jobs` Jobs (the JobSet plugin sets replicas and sizes from `PodSet.jobs`); outside MPI,
    the `node` container's command wrapped so its rank variables hold the rank."""
    pod_set.jobs = split.jobs
    node = pod_set.container(c.NODE)
    if info.trainer_owner == MPI or node is None:
        return
    names = rank_names(pod_set)
    node.env = [e for e in node.env or [] if not _from_completion_index(e)]
    upsert_env(node, [EnvVar(name=JOB_INDEX_ENV, value_from={"fieldRef": {"fieldPath": c.JOBSET_JOB_INDEX_FIELD}})])
    command = info.trainer_command if info.trainer_command is not None else list(node.command or [])
    args = info.trainer_args if info.trainer_args is not None else list(node.args or [])
    try:
        wrapped = rank_command(split, [*names, COMPLETION_INDEX_ENV], command, args)
    except ValueError as err:
        raise BuildError(f"{PATH}: {err}") from err
    node.command, node.args = wrapped, None
    info.trainer_command, info.trainer_args = wrapped, None


class TrainerSplit(CustomValidation, EnforcePodSpec):
    name: ClassVar[str] = "TrainerSplit"

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        raw = requested(new)
        errors: list[FieldError] = []
        if old is not None and requested(old) != raw:
            errors.append(forbidden(PATH, "cannot be added, changed or removed after the TrainJob is created"))
        if raw is not None:
            errors += request_errors(info, new, raw)
        queued = c.KUEUE_QUEUE_NAME_LABEL in (new.metadata.labels or {})
        warnings = (KUEUE_WARNING,) if raw is not None and queued and old is None and not errors else ()
        return Validation(tuple(errors), warnings)

    def enforce_pod_spec(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> None:
        raw = requested(job)
        if raw is None:
            return
        errors = request_errors(info, job, raw)
        if errors:  # admitted before the webhook ran, or refused by it: never built half-cut
            raise BuildError(str(errors[0]))
        pod_set = target(info)
        bound = parse_bound(raw)
        assert pod_set is not None and bound is not None  # request_errors refused both
        split = split_for(pod_set.count, bound)
        if split.cut:
            cut(info, pod_set, split)
