"""WorkloadScheduling: gang scheduling by Kubernetes itself (the Workload and PodGroup API, `scheduling.k8s.io/v1beta1`,
Kubernetes 1.37; Kubeflow Trainer KEP-3015, proposed), behind the operator's `TrainJobWorkloadAwareScheduling` gate
(docs/gang-scheduling.md).

A runtime opts in with `spec.scheduling`. Per TrainJob the operator creates one Workload (a template: one
PodGroupTemplate per group) and one PodGroup per group, both controlled by the TrainJob (its uid), before the JobSet;
every pod template of a group's replicated jobs names its PodGroup (`spec.schedulingGroup.podGroupName`), so the Job
controller leaves them alone (a parent that owns both objects, KEP-5547) and kube-scheduler binds a group's pods
together or not at all. The groups:

- TrainJob level (`schedulingPolicy`, no `replicatedJobs`): one group of every pod; when replicated jobs wait for
  each other (`dependsOn`), one group per replicated job instead (one gang over all would never fill: the later
  jobs' pods only come once the earlier ones ran).
- `replicatedJobs`: one group per entry, of the replicated jobs it names.

`minCount` is computed (Σ pods of the group's replicated jobs); both objects are created once and never updated, so
`spec.trainer.numNodes` is fixed while a TrainJob is gang-scheduled. They stay through suspend and resume: the
scheduler counts a group's current pods, so a resumed TrainJob's pods are bound together again.
"""

import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

from ...api import constants as c
from ...api.runtime import PodGroupSchedulingPolicy, ReplicatedJobScheduling, Scheduling
from ...api.trainjob import TrainJob
from ..errors import BuildError, Validation, forbidden, invalid
from ..framework import ChildKind, ComponentBuilder, CustomValidation, EnforcePodSpec, Manifest, Mode, OwnsKinds
from ..info import PodSet, RuntimeInfo
from ..manifests import owned_metadata
from ..observed import Observed

GATE = "TrainJobWorkloadAwareScheduling"
"""The operator's feature gate (KEP-3015's name): off by default."""
API_VERSION = "scheduling.k8s.io/v1beta1"
WORKLOAD_KIND = "Workload"
POD_GROUP_KIND = "PodGroup"
MAX_TEMPLATES = 8
"""Kubernetes' cap on a Workload's PodGroupTemplates."""
MAX_NAME = 253
SCHEDULING_GROUP = "schedulingGroup"
"""The pod spec field that names a pod's PodGroup (immutable)."""
ANCESTORS_OF_ONE_JOB = (c.DATASET_INITIALIZER, c.MODEL_INITIALIZER, c.ANCESTOR_TRAINER)
"""Replicated jobs the JobSet gets with one replica, whatever the runtime says (plugins/jobset.py)."""
NEEDS = (
    "Kubernetes 1.37 or later with --feature-gates=GenericWorkload=true on kube-apiserver and kube-scheduler and "
    "--runtime-config=scheduling.k8s.io/v1beta1=true"
)


@dataclass(frozen=True)
class Group:
    """One PodGroupTemplate of the Workload and the PodGroup made from it."""

    template: str
    """The template's name."""
    jobs: tuple[str, ...]
    """The replicated jobs whose pods are in the group."""
    policy: dict[str, Any]
    """`schedulingPolicy` on the wire: `{"gang": {"minCount": n}}` or `{"basic": {}}`."""
    constraints: dict[str, Any] | None = None
    disruption: dict[str, Any] | None = None


def pods_of(pod_set: PodSet) -> int:
    """The pods one replicated job runs: its parallelism (numNodes for the trainer) times its Jobs."""
    replicas = 1 if pod_set.ancestor in ANCESTORS_OF_ONE_JOB else pod_set.replicas
    return pod_set.count * replicas


def _policy(policy: PodGroupSchedulingPolicy | None, pods: int) -> dict[str, Any]:
    if policy is not None and policy.basic is not None:
        return {"basic": {}}
    return {"gang": {"minCount": pods}}


def _wire(model: Any) -> dict[str, Any] | None:
    return model.to_wire() if model is not None else None


def sequenced(info: RuntimeInfo) -> bool:
    """Whether some replicated job waits for another (`dependsOn`)."""
    return any(p.job.depends_on for p in info.pod_sets)


def groups(info: RuntimeInfo, job: TrainJob, scheduling: Scheduling) -> list[Group]:
    """The groups of a TrainJob, in the runtime's order (`validate` has refused what does not resolve)."""
    by_name = {p.name: p for p in info.pod_sets}
    if scheduling.replicated_jobs:
        result = []
        for entry in scheduling.replicated_jobs:
            names = tuple(n for n in (p.name for p in info.pod_sets) if n in entry.target_replicated_jobs)
            pods = sum(pods_of(by_name[n]) for n in names)
            result.append(
                Group(
                    "-".join(names),
                    names,
                    _policy(entry.scheduling_policy, pods),
                    _wire(entry.scheduling_constraints),
                    _wire(entry.disruption_mode),
                )
            )
        return result
    constraints, disruption = _wire(scheduling.scheduling_constraints), _wire(scheduling.disruption_mode)
    if sequenced(info):
        return [
            Group(p.name, (p.name,), _policy(scheduling.scheduling_policy, pods_of(p)), constraints, disruption)
            for p in info.pod_sets
        ]
    names = tuple(p.name for p in info.pod_sets)
    pods = sum(pods_of(p) for p in info.pod_sets)
    return [Group(job.name, names, _policy(scheduling.scheduling_policy, pods), constraints, disruption)]


def workload_name(job: TrainJob) -> str:
    return job.name


def pod_group_name(job: TrainJob, group: Group) -> str:
    """`<trainjob>` for the one TrainJob-level group, else `<trainjob>-<template>` (a hash keeps it within 253)."""
    if group.template == job.name:
        return job.name
    name = f"{job.name}-{group.template}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[: MAX_NAME - 11].rstrip('-')}-{digest}"


def gang_scheduled(scheduling: Scheduling | None) -> bool:
    """Whether some group of the runtime is a gang (its size follows numNodes)."""
    if scheduling is None:
        return False
    if scheduling.replicated_jobs:
        return any(
            e.scheduling_policy is None or e.scheduling_policy.gang is not None for e in scheduling.replicated_jobs
        )
    return scheduling.scheduling_policy is None or scheduling.scheduling_policy.gang is not None


class WorkloadScheduling(EnforcePodSpec, ComponentBuilder, CustomValidation, OwnsKinds):
    name: ClassVar[str] = "WorkloadScheduling"
    gate: ClassVar[str] = GATE
    """Built with `enabled=` the gate's value (`registry.gated`); off when built without."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self.api_served = True
        """False once the start-up discovery found the Workload API missing (controller/components.py): a TrainJob of
        a runtime with spec.scheduling is then refused, and one admitted before fails, saying so."""

    def _scheduling(self, info: RuntimeInfo) -> Scheduling | None:
        return info.runtime.spec.scheduling

    def enforce_pod_spec(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> None:
        scheduling = self._scheduling(info)
        if scheduling is None or not self.enabled:
            return
        by_name = {p.name: p for p in info.pod_sets}
        for group in groups(info, job, scheduling):
            for name in group.jobs:
                spec = by_name[name].pod_spec
                extra = spec.__pydantic_extra__
                if extra is None:
                    raise BuildError("internal: the pod spec model keeps no unknown fields")
                extra[SCHEDULING_GROUP] = {"podGroupName": pod_group_name(job, group)}

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        scheduling = self._scheduling(info)
        if scheduling is None:
            return []
        if not self.enabled:
            # Never run a TrainJob that asked for a gang without one.
            raise BuildError(gate_off(info))
        if not self.api_served:
            raise BuildError(api_not_served(info))
        found = groups(info, job, scheduling)
        objects: list[Manifest] = []
        if not observed.exists(API_VERSION, WORKLOAD_KIND, workload_name(job)):
            objects.append(workload(job, found))
        for group in found:
            if not observed.exists(API_VERSION, POD_GROUP_KIND, pod_group_name(job, group)):
                objects.append(pod_group(job, group))
        return objects

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        scheduling = self._scheduling(info)
        if scheduling is None:
            return Validation()
        if not self.enabled:
            return Validation((invalid("spec.runtimeRef", new.spec.runtime_ref.to_wire(), gate_off(info)),))
        if not self.api_served:
            return Validation((invalid("spec.runtimeRef", new.spec.runtime_ref.to_wire(), api_not_served(info)),))
        problems = runtime_problems(info)
        if not problems:
            problems += too_many(info, new, scheduling)
        ref = new.spec.runtime_ref.to_wire()
        errors = [invalid("spec.runtimeRef", ref, f"runtime {info.runtime.name}: {p}") for p in problems]
        if old is not None and gang_scheduled(scheduling):
            before = old.spec.trainer.num_nodes if old.spec.trainer is not None else None
            after = new.spec.trainer.num_nodes if new.spec.trainer is not None else None
            if before != after:
                errors.append(
                    forbidden(
                        "spec.trainer.numNodes",
                        f"cannot be changed while the TrainJob is gang-scheduled by the Workload API (runtime "
                        f"{info.runtime.name} sets spec.scheduling): the gang's minCount is fixed once its Workload "
                        f"exists; create a new TrainJob",
                    )
                )
        return Validation(tuple(errors))

    def kinds(self) -> list[ChildKind]:
        return [
            ChildKind(
                API_VERSION,
                WORKLOAD_KIND,
                "workloads",
                mode=Mode.CREATE_ONCE,
                optional=True,
                purpose="Workloads (gang scheduling by Kubernetes 1.37+, TrainJobWorkloadAwareScheduling)",
            ),
            ChildKind(
                API_VERSION,
                POD_GROUP_KIND,
                "podgroups",
                mode=Mode.CREATE_ONCE,
                optional=True,
                purpose="PodGroups of those Workloads",
            ),
        ]


def api_missing(served: frozenset[str] | None) -> str | None:
    """The one start-up line when the gate is on but the API server does not serve the Workload API (what
    discovery of `scheduling.k8s.io/v1beta1` found: its resources, None when not served at all); None when it does."""
    if served is not None and {"workloads", "podgroups"} <= served:
        return None
    return (
        f"{GATE} is on, but the API server does not serve workloads and podgroups of {API_VERSION}: TrainJobs of "
        f"runtimes with spec.scheduling will fail (needs {NEEDS})"
    )


def api_not_served(info: RuntimeInfo) -> str:
    return (
        f"runtime {info.runtime.name} sets spec.scheduling (gang scheduling by the Workload API), but this cluster's "
        f"API server does not serve workloads and podgroups of {API_VERSION} (needs {NEEDS})"
    )


def gate_off(info: RuntimeInfo) -> str:
    return (
        f"runtime {info.runtime.name} sets spec.scheduling (gang scheduling by the Workload API), but this operator "
        f"runs with its {GATE} feature gate off: set feature_gates: {{{GATE}: true}} in its config ({NEEDS})"
    )


def workload(job: TrainJob, found: list[Group]) -> Manifest:
    templates = []
    for group in found:
        template: dict[str, Any] = {"name": group.template, "schedulingPolicy": group.policy}
        if group.constraints:
            template["schedulingConstraints"] = group.constraints
        if group.disruption:
            template["disruptionMode"] = group.disruption
        templates.append(template)
    return {
        "apiVersion": API_VERSION,
        "kind": WORKLOAD_KIND,
        "metadata": owned_metadata(job, workload_name(job)),
        "spec": {
            "controllerRef": {"apiGroup": c.GROUP, "kind": c.TRAINJOB_KIND, "name": job.name},
            "podGroupTemplates": templates,
        },
    }


def pod_group(job: TrainJob, group: Group) -> Manifest:
    spec: dict[str, Any] = {
        "workloadRef": {"workloadName": workload_name(job), "templateName": group.template},
        "schedulingPolicy": group.policy,
    }
    if group.constraints:
        spec["schedulingConstraints"] = group.constraints
    if group.disruption:
        spec["disruptionMode"] = group.disruption
    return {
        "apiVersion": API_VERSION,
        "kind": POD_GROUP_KIND,
        "metadata": owned_metadata(job, pod_group_name(job, group)),
        "spec": spec,
    }


# --- admission: what is wrong with a runtime's spec.scheduling, said as `<its field>: <why>` ------------------------

SPEC = "spec.scheduling"


def _policy_problems(path: str, policy: PodGroupSchedulingPolicy | None) -> list[str]:
    if policy is None:
        return []
    problems = []
    if policy.basic is not None and policy.gang is not None:
        problems.append(f"{path}: must set exactly one of basic and gang")
    if policy.gang is not None and policy.gang.min_count is not None:
        problems.append(
            f"{path}.gang.minCount: must not be set ({policy.gang.min_count}): the operator computes it from the "
            f"TrainJob (spec.trainer.numNodes)"
        )
    return problems


def _depends(info: RuntimeInfo) -> dict[str, set[str]]:
    """Each replicated job's predecessors, transitively (`dependsOn`)."""
    direct = {p.name: {d.name for d in p.job.depends_on or []} for p in info.pod_sets}
    closure: dict[str, set[str]] = {}
    for name in direct:
        seen: set[str] = set()
        todo = list(direct[name])
        while todo:
            nxt = todo.pop()
            if nxt not in seen:
                seen.add(nxt)
                todo.extend(direct.get(nxt, ()))
        closure[name] = seen
    return closure


def _entry_problems(
    index: int, entry: ReplicatedJobScheduling, names: list[str], taken: dict[str, int], after: dict[str, set[str]]
) -> list[str]:
    path = f"{SPEC}.replicatedJobs[{index}]"
    problems = _policy_problems(f"{path}.schedulingPolicy", entry.scheduling_policy)
    targets = path + ".targetReplicatedJobs"
    for target in entry.target_replicated_jobs:
        if target not in names:
            problems.append(f"{targets}: {target!r} names no replicated job of the template ({', '.join(names)})")
        elif target in taken:
            problems.append(f"{targets}: {target!r} is already in {SPEC}.replicatedJobs[{taken[target]}]")
        else:
            taken[target] = index
    gang = entry.scheduling_policy is None or entry.scheduling_policy.gang is not None
    for target in entry.target_replicated_jobs:
        waits_for = sorted(after.get(target, set()) & set(entry.target_replicated_jobs))
        if gang and waits_for:
            problems.append(
                f"{targets}: {target} waits for {', '.join(waits_for)} (dependsOn), so one gang of them would never "
                f"fill; give each its own entry"
            )
    return problems


def runtime_problems(info: RuntimeInfo) -> list[str]:
    """What is wrong with the runtime's `spec.scheduling` (a TrainJob of it is refused, naming the runtime)."""
    scheduling = info.runtime.spec.scheduling
    if scheduling is None:
        return []
    problems: list[str] = []
    if info.runtime.spec.pod_group_policy is not None:
        problems.append(f"{SPEC} and spec.podGroupPolicy are mutually exclusive (one gang scheduler)")
    problems += _policy_problems(f"{SPEC}.schedulingPolicy", scheduling.scheduling_policy)
    level1 = [
        field
        for field, value in (
            ("schedulingPolicy", scheduling.scheduling_policy),
            ("schedulingConstraints", scheduling.scheduling_constraints),
            ("disruptionMode", scheduling.disruption_mode),
        )
        if value is not None
    ]
    names = [p.name for p in info.pod_sets]
    if scheduling.replicated_jobs:
        if level1:
            problems.append(
                f"{SPEC}: {', '.join(level1)} and replicatedJobs are mutually exclusive (a TrainJob-level group over "
                f"per-replicated-job groups needs a CompositePodGroup, not supported)"
            )
        taken: dict[str, int] = {}
        after = _depends(info)
        for index, entry in enumerate(scheduling.replicated_jobs):
            problems += _entry_problems(index, entry, names, taken, after)
        missing = [n for n in names if n not in taken]
        if missing:
            problems.append(
                f"{SPEC}.replicatedJobs: must name every replicated job of the template once; missing: "
                f"{', '.join(missing)}"
            )
    for pod_set in info.pod_sets:
        if SCHEDULING_GROUP in (pod_set.pod_spec.__pydantic_extra__ or {}):
            problems.append(
                f"spec.template.spec.replicatedJobs[{pod_set.name}].template.spec.template.spec.schedulingGroup: "
                f"must not be set with {SPEC}: the operator names each pod's PodGroup"
            )
    return problems


def too_many(info: RuntimeInfo, job: TrainJob, scheduling: Scheduling) -> list[str]:
    found = groups(info, job, scheduling)
    if len(found) <= MAX_TEMPLATES:
        return []
    return [f"{SPEC}: resolves to {len(found)} pod groups; a Workload holds at most {MAX_TEMPLATES}"]
