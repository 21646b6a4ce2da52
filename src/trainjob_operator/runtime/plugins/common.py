"""Small helpers several plugins share."""

from ...api import constants as c
from ...api.core import EnvVar, ResourceRequirements
from ...api.trainjob import TrainJob
from ..info import PodSet, RuntimeInfo
from ..upsert import upsert_env

COMPLETION_INDEX_ENV_SOURCE = {"fieldRef": {"fieldPath": c.JOB_COMPLETION_INDEX_FIELD}}


def completion_index_env(name: str) -> EnvVar:
    return EnvVar(name=name, value_from=COMPLETION_INDEX_ENV_SOURCE)


def first_pod_address(job: TrainJob) -> str:
    """The DNS name of the first trainer pod; always `<tj>-node-0-0.<tj>` upstream
    (docs/upstream-behaviour.md#the-trainer-pod-address)."""
    return f"{job.name}-{c.NODE}-0-0.{job.name}"


def pod_hosts(info: RuntimeInfo, job: TrainJob, pod_set: PodSet) -> list[str]:
    """The stable DNS name of every pod of `pod_set`, in (job index, completion index) order: JobSet names pod
    `<jobset>-<replicated job>-<job index>-<pod index>` under the `<subdomain>` headless Service (default: its name).
    A cut pod set (`PodSet.jobs`) lists its Jobs' pods in rank order."""
    subdomain = info.subdomain or job.name
    replicas, per_job = (
        (pod_set.jobs, pod_set.count // pod_set.jobs) if pod_set.jobs > 1 else (pod_set.replicas, pod_set.count)
    )
    return [
        f"{job.name}-{pod_set.name}-{replica}-{pod}.{subdomain}"
        for replica in range(replicas)
        for pod in range(per_job)
    ]


def decision_resources(info: RuntimeInfo, job: TrainJob) -> ResourceRequirements | None:
    """TrainJob resourcesPerNode as is when set, else the runtime `node` container's
    (docs/upstream-behaviour.md#runtime-info)."""
    if job.spec.trainer is not None and job.spec.trainer.resources_per_node is not None:
        return job.spec.trainer.resources_per_node
    for pod_set in info.pod_sets:
        if pod_set.name == c.NODE or pod_set.ancestor == c.ANCESTOR_TRAINER:
            node = pod_set.container(c.NODE)
            if node is not None:
                return node.resources
    return None


def set_trainer_count(info: RuntimeInfo, job: TrainJob) -> None:
    """TrainJob numNodes (0 included) overrides the trainer PodSet count."""
    trainer = info.ancestor(c.ANCESTOR_TRAINER)
    if trainer is not None and job.spec.trainer is not None and job.spec.trainer.num_nodes is not None:
        trainer.count = job.spec.trainer.num_nodes


def plain_trainer(info: RuntimeInfo, job: TrainJob) -> None:
    """What every trainer gets unless its framework does it its own way: the TrainJob's numNodes as the trainer
    count and its env on the `node` container (PlainML, and frameworks that add to it: Flux, TensorFlow)."""
    set_trainer_count(info, job)
    trainer = info.ancestor(c.ANCESTOR_TRAINER)
    node = trainer.container(c.NODE) if trainer is not None else None
    if node is not None and job.spec.trainer is not None and job.spec.trainer.env:
        upsert_env(node, job.spec.trainer.env)
