"""RuntimeInfo: the scratchpad one pipeline run builds from a TrainJob and its runtime, then plugins mutate."""

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..api import constants as c
from ..api.core import Container, PodSpec, ResourceRequirements
from ..api.jobset_types import JobSetSpec, ReplicatedJob
from ..api.runtime import AnyRuntime, MLPolicy, PodGroupPolicy, TrainingRuntimeSpec
from ..api.trainjob import TrainJob
from ..codec import yamldump
from . import smp
from .resources import merge_resources
from .upsert import find_container


@dataclass(frozen=True)
class RuntimeSource:
    """A runtime as the pipeline consumes it: its kind/name, typed spec and the template in wire form.

    Made once per runtime object (and version) by the caller so many TrainJobs share the parsing.
    """

    kind: str
    name: str
    namespace: str | None
    spec: TrainingRuntimeSpec
    template_spec: dict[str, Any]
    labels: dict[str, str]
    obj: dict[str, Any]
    """The whole runtime object in wire form (apiVersion, kind, metadata, spec), for the snapshot."""

    @classmethod
    def of(cls, runtime: "AnyRuntime") -> "RuntimeSource":
        meta = runtime.metadata
        return cls(
            kind=runtime.kind,
            name=meta.name or "",
            namespace=meta.namespace,
            spec=runtime.spec,
            template_spec=runtime.spec.template.spec.to_wire(),
            labels=dict(meta.labels or {}),
            obj=runtime.to_wire(),
        )

    @cached_property
    def snapshot_yaml(self) -> str:
        """The whole runtime object as the snapshot ConfigMap stores it (made once per runtime version)."""
        return yamldump.dump_document(self.obj)

    @property
    def deprecated(self) -> bool:
        return self.labels.get(c.SUPPORT_LABEL) == c.SUPPORT_DEPRECATED


@dataclass
class PodSet:
    """One replicated job of the JobSet being built; `job` is the live, mutable template piece."""

    name: str
    ancestor: str | None
    count: int
    job: ReplicatedJob
    jobs: int = 1
    """The Jobs its pods are cut into (issue 37, `plugins/trainer_split.py`): `count` stays every pod of them all, and
    the JobSet gets `replicas: jobs` of `count // jobs` pods each."""

    @property
    def pod_spec(self) -> PodSpec:
        template = self.job.template.spec.template
        if template.spec is None:
            template.spec = PodSpec()
        return template.spec

    @property
    def replicas(self) -> int:
        return self.job.replicas if self.job.replicas is not None else 1

    def container(self, name: str, include_init: bool = False) -> Container | None:
        return find_container(self.job.template.spec.template.spec, name, include_init)


@dataclass
class Scheduler:
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class RuntimeInfo:
    runtime: RuntimeSource
    labels: dict[str, str]
    annotations: dict[str, str]
    template: JobSetSpec
    pod_sets: list[PodSet]
    ml_policy: MLPolicy | None
    pod_group_policy: PodGroupPolicy | None
    scheduler: Scheduler = field(default_factory=Scheduler)
    trainer_command: list[str] | None = None
    trainer_args: list[str] | None = None
    """What the JobSet's trainer `node` container gets as command/args (None: the runtime's stay); the TrainJob's
    by default, rewritten by torchtune and Flux."""
    trainer_owner: str | None = None
    """The plugin that configures the trainer (`Framework.claim_trainer`: the first that claims it); None: none
    does, PlainML sets the count and env."""

    def pod_set(self, name: str) -> PodSet | None:
        return next((p for p in self.pod_sets if p.name == name), None)

    def ancestor(self, ancestor: str) -> PodSet | None:
        return next((p for p in self.pod_sets if p.ancestor == ancestor), None)

    @property
    def subdomain(self) -> str | None:
        return self.template.network.subdomain if self.template.network is not None else None


def patched_template(job: TrainJob, runtime: RuntimeSource) -> tuple[dict[str, str], dict[str, str], JobSetSpec]:
    """Runtime template metadata and spec with every runtime patch applied in list order
    (docs/upstream-behaviour.md#runtime-patches)."""
    meta = runtime.spec.template.metadata
    labels = dict(meta.labels or {}) if meta is not None else {}
    annotations = dict(meta.annotations or {}) if meta is not None else {}
    spec: dict[str, Any] = runtime.template_spec
    for patch in job.spec.runtime_patches or []:
        template = patch.training_runtime_spec.template if patch.training_runtime_spec else None
        if template is None:
            continue
        if template.metadata is not None:
            labels.update(template.metadata.labels or {})
            annotations.update(template.metadata.annotations or {})
        if template.spec is not None:
            spec = smp.merge(spec, template.spec.to_wire())
    if spec is not runtime.template_spec:
        spec = _restore_order(spec, runtime.template_spec)
    return labels, annotations, JobSetSpec.model_validate(spec)


def _restore_order(spec: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    order = {rj.get("name"): i for i, rj in enumerate(original.get("replicatedJobs") or [])}
    jobs = sorted(spec.get("replicatedJobs") or [], key=lambda rj: order.get(rj.get("name"), len(order)))
    return {**spec, "replicatedJobs": jobs}


def merge_node_resources(rjob: ReplicatedJob, resources: ResourceRequirements) -> None:
    """The TrainJob's resourcesPerNode merged into the replicated job's `node` container."""
    node = find_container(rjob.template.spec.template.spec, c.NODE)
    if node is not None:
        node.resources = merge_resources(node.resources, resources)


def new_runtime_info(job: TrainJob, runtime: RuntimeSource) -> RuntimeInfo:
    """The Info of docs/upstream-behaviour.md#runtime-info: patched template, merged resources and one PodSet per
    replicated job."""
    labels, annotations, template = patched_template(job, runtime)
    ml_policy = runtime.spec.ml_policy
    trainer = job.spec.trainer
    resources = trainer.resources_per_node if trainer is not None else None
    pod_sets: list[PodSet] = []
    for rjob in template.replicated_jobs:
        job_meta = rjob.template.metadata
        ancestor = (job_meta.labels or {}).get(c.ANCESTOR_LABEL) if job_meta is not None else None
        parallelism = rjob.template.spec.parallelism
        count = parallelism if parallelism is not None else 1
        if ancestor == c.ANCESTOR_TRAINER and ml_policy is not None:
            count = ml_policy.num_nodes if ml_policy.num_nodes is not None else 1
        if resources is not None and ancestor == c.ANCESTOR_TRAINER and ml_policy is not None:
            merge_node_resources(rjob, resources)
        pod_sets.append(PodSet(rjob.name, ancestor, max(count, 1), rjob))
    command = list(trainer.command) if trainer is not None and trainer.command is not None else None
    args = list(trainer.args) if trainer is not None and trainer.args is not None else None
    return RuntimeInfo(
        runtime=runtime,
        labels=labels,
        annotations=annotations,
        template=template,
        pod_sets=pod_sets,
        ml_policy=ml_policy,
        pod_group_policy=runtime.spec.pod_group_policy,
        trainer_command=command,
        trainer_args=args,
    )
