"""The API's own limits on what a build writes, checked before anything is built (issue 28, item 4).

Admission (the webhook and `validate`, through each plugin's CustomValidation and `trainer_count_errors`) refuses
a TrainJob whose objects the API server would refuse, naming the field and the limit; the build checks the same
before it makes anything whose size grows with the TrainJob's numbers, so no TrainJob costs the operator more than
a bounded amount of memory and time (a hostfile of `numNodes: 2147483647` is refused, never written out). The sizes
are computed, not built: the pod host names' lengths in closed form.
"""

from ..api import constants as c
from ..api.trainjob import TrainJob
from .errors import FieldError, invalid
from .info import PodSet, RuntimeInfo

INDEXED_JOB_LIMIT = 100_000
"""An Indexed Job's completions and parallelism (batch/v1 validation; JobSet's Jobs are Indexed): the most pods of
one trainer Job, so the most nodes a TrainJob can ask for."""
CONFIGMAP_DATA_LIMIT = 1 << 20
"""The bytes a ConfigMap's (or a Secret's) data may hold in all (core/v1 validation)."""
POD_NAME_LIMIT = 63
"""JobSet refuses a JobSet whose pod names `<jobset>-<replicated job>-<job index>-<pod index>-<5 characters>` could
exceed 63 characters ("JobSet name is too long, pod names generated for this JobSet will exceed 63 characters")."""
POD_NAME_SUFFIX = 6
"""`-` and the 5 random characters the Job controller appends to a pod's name."""
ENV_VALUE_LIMIT = 1 << 20
"""The bytes of one generated environment value (TF_CONFIG): the JobSet that carries it must stay within the
API server's object size (etcd's default request limit is 1.5 MiB)."""


def digits_total(count: int) -> int:
    """`sum(len(str(i)) for i in range(count))`, in closed form."""
    total, width, start = 0, 1, 0
    while start < count:
        end = min(count, 10**width)
        total += (end - start) * width
        start, width = end, width + 1
    return total


def hosts_bytes(info: RuntimeInfo, job: TrainJob, pod_set: PodSet, per_host: int, count: int | None = None) -> int:
    """The characters of `common.pod_hosts(info, job, pod_set)`, each host followed by `per_host` more, without
    making the list: `<job>-<set>-<replica>-<pod>.<subdomain>` for every replica and pod (`count` pods per replica
    when given: admission sees the runtime's count before the ML policy sets the TrainJob's)."""
    subdomain = info.subdomain or job.name
    fixed = len(job.name) + len(pod_set.name) + len(subdomain) + 4 + per_host  # three dashes and a dot
    replicas, pods = pod_set.replicas, pod_set.count if count is None else count
    return replicas * pods * fixed + pods * digits_total(replicas) + replicas * digits_total(pods)


def trainer_nodes(info: RuntimeInfo, job: TrainJob) -> int | None:
    """The trainer's node count: the TrainJob's numNodes over the runtime's (None without a trainer)."""
    trainer = info.ancestor(c.ANCESTOR_TRAINER)
    if trainer is None:
        return None
    asked = job.spec.trainer.num_nodes if job.spec.trainer is not None else None
    return asked if asked is not None else trainer.count


def trainer_count_errors(info: RuntimeInfo, job: TrainJob) -> list[FieldError]:
    """The trainer's node count within an Indexed Job's limit."""
    nodes = trainer_nodes(info, job)
    if nodes is None or nodes <= INDEXED_JOB_LIMIT:
        return []
    return [
        invalid(
            "spec.trainer.numNodes",
            nodes,
            f"must be at most {INDEXED_JOB_LIMIT}: a JobSet's Indexed Job runs at most {INDEXED_JOB_LIMIT} pods "
            "(completions and parallelism)",
        )
    ]


def pod_name_errors(info: RuntimeInfo, job: TrainJob, enforced: bool) -> list[FieldError]:
    """JobSet's limit on the pod names it will generate, for every replicated job. `enforced`: the ML policies have
    set the counts (the build); otherwise (admission) the trainer's and `node`'s counts are taken as the TrainJob's
    numNodes, which overstates an MPI launcher-as-node job's by one pod at most (a digit, only at a power of ten)."""
    nodes = trainer_nodes(info, job)
    for pod_set in info.pod_sets:
        count = pod_set.count
        if not enforced and nodes is not None and (pod_set.ancestor == c.ANCESTOR_TRAINER or pod_set.name == c.NODE):
            count = max(count, nodes)
        longest = len(f"{job.name}-{pod_set.name}-{pod_set.replicas - 1}-{max(count - 1, 0)}") + POD_NAME_SUFFIX
        if longest > POD_NAME_LIMIT:
            room = len(job.name) - (longest - POD_NAME_LIMIT)
            return [
                invalid(
                    "metadata.name",
                    job.name,
                    f"must be no more than {max(room, 0)} characters for this runtime and size: JobSet names its "
                    f"pods <name>-{pod_set.name}-<job index>-<pod index>-<5 characters>, at most "
                    f"{POD_NAME_LIMIT} characters (here {longest})",
                )
            ]
    return []


def too_large(what: str, size: int, limit: int, nodes: int) -> FieldError:
    return invalid(
        "spec.trainer.numNodes",
        nodes,
        f"too many nodes: the {what} would be {size} bytes, over the API's limit of {limit} bytes",
    )
