"""Volcano: PodGroup with queue, priority class and network topology; group-name annotation
(docs/upstream-behaviour.md#gang-scheduling)."""

from typing import Any, ClassVar

from ...api import constants as c
from ...api.trainjob import TrainJob
from ..errors import FieldError, Validation, invalid
from ..framework import (
    ChildKind,
    ComponentBuilder,
    CustomValidation,
    DeclaresReads,
    EnforcePodGroupPolicy,
    Manifest,
    OwnsKinds,
)
from ..info import RuntimeInfo, RuntimeSource
from ..manifests import owned_metadata
from ..observed import Observed, Read
from .podgroup import min_member, min_resources

SYSTEM_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
PRIORITY_CLASSES = Read("scheduling.k8s.io/v1", "PriorityClass")
"""Every PriorityClass: the pods of a Volcano runtime must name one that exists."""


class Volcano(EnforcePodGroupPolicy, ComponentBuilder, CustomValidation, OwnsKinds, DeclaresReads):
    name: ClassVar[str] = "Volcano"

    def reads(self, job: TrainJob, runtime: RuntimeSource) -> list[Read]:
        policy = runtime.spec.pod_group_policy
        return [PRIORITY_CLASSES] if policy is not None and policy.volcano is not None else []

    def enforce_pod_group_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if info.pod_group_policy is None or info.pod_group_policy.volcano is None:
            return
        info.scheduler.pod_annotations[c.VOLCANO_GROUP_NAME_ANNOTATION] = job.name

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        policy = info.pod_group_policy.volcano if info.pod_group_policy is not None else None
        exists = observed.exists(c.VOLCANO_API_VERSION, c.POD_GROUP_KIND, job.name)
        if policy is None or (exists and not job.spec.suspend):
            return []
        spec: dict[str, Any] = {"minMember": min_member(info), "minResources": min_resources(info)}
        queue = info.annotations.get(c.VOLCANO_QUEUE_NAME_ANNOTATION)
        if queue:
            spec["queue"] = queue
        priority = None
        for pod_set in info.pod_sets:
            priority = pod_set.pod_spec.priority_class_name or priority
        if priority:
            spec["priorityClassName"] = priority
        if policy.network_topology is not None:
            spec["networkTopology"] = policy.network_topology.to_wire()
        return [
            {
                "apiVersion": c.VOLCANO_API_VERSION,
                "kind": c.POD_GROUP_KIND,
                "metadata": owned_metadata(job, job.name),
                "spec": spec,
            }
        ]

    def validate(self, info: RuntimeInfo, old: TrainJob | None, new: TrainJob, observed: Observed) -> Validation:
        if info.pod_group_policy is None or info.pod_group_policy.volcano is None:
            return Validation()
        errors: list[FieldError] = []
        queue = info.annotations.get(c.VOLCANO_QUEUE_NAME_ANNOTATION)
        if queue is not None and queue == "":
            errors.append(
                invalid(
                    f"spec.annotations[{c.VOLCANO_QUEUE_NAME_ANNOTATION}]",
                    queue,
                    "Volcano queue name must not be empty",
                )
            )
        found = observed.reads.get(PRIORITY_CLASSES)
        if found is not None:
            existing = {(item.get("metadata") or {}).get("name") for item in found}
            for pod_set in info.pod_sets:
                name = pod_set.pod_spec.priority_class_name
                if name in SYSTEM_PRIORITY_CLASSES:
                    break  # upstream stops checking at a system priority class
                if not name:
                    continue
                if name not in existing:
                    errors.append(
                        invalid(
                            "spec.templateSpec.priorityClassName",
                            name,
                            f'PriorityClass "{name}" doesn\'t exist: '
                            f'priorityclasses.scheduling.k8s.io "{name}" not found',
                        )
                    )
        return Validation(tuple(errors))

    def kinds(self) -> list[ChildKind]:
        return [
            ChildKind(
                c.VOLCANO_API_VERSION,
                c.POD_GROUP_KIND,
                "podgroups",
                probe=True,
                optional=True,
                purpose="Volcano PodGroups (gang scheduling)",
            )
        ]
