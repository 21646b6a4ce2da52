"""CoScheduling: scheduler-plugins PodGroup and the pod-group label on every pod
(docs/upstream-behaviour.md#gang-scheduling)."""

from typing import ClassVar

from ...api import constants as c
from ...api.trainjob import TrainJob
from ..framework import ChildKind, ComponentBuilder, EnforcePodGroupPolicy, Manifest, OwnsKinds
from ..info import RuntimeInfo
from ..manifests import owned_metadata
from ..observed import Observed
from .podgroup import min_member, min_resources


class CoScheduling(EnforcePodGroupPolicy, ComponentBuilder, OwnsKinds):
    name: ClassVar[str] = "CoScheduling"

    def enforce_pod_group_policy(self, info: RuntimeInfo, job: TrainJob) -> None:
        if info.pod_group_policy is None or info.pod_group_policy.coscheduling is None:
            return
        info.scheduler.pod_labels[c.COSCHEDULING_POD_GROUP_LABEL] = job.name

    def build(self, info: RuntimeInfo, job: TrainJob, observed: Observed) -> list[Manifest]:
        policy = info.pod_group_policy.coscheduling if info.pod_group_policy is not None else None
        exists = observed.exists(c.COSCHEDULING_API_VERSION, c.POD_GROUP_KIND, job.name)
        if policy is None or (exists and not job.spec.suspend):
            return []
        timeout = policy.schedule_timeout_seconds if policy.schedule_timeout_seconds is not None else 60
        return [
            {
                "apiVersion": c.COSCHEDULING_API_VERSION,
                "kind": c.POD_GROUP_KIND,
                "metadata": owned_metadata(job, job.name),
                "spec": {
                    "minMember": min_member(info),
                    "minResources": min_resources(info),
                    "scheduleTimeoutSeconds": timeout,
                },
            }
        ]

    def kinds(self) -> list[ChildKind]:
        return [
            ChildKind(
                c.COSCHEDULING_API_VERSION,
                c.POD_GROUP_KIND,
                "podgroups",
                probe=True,
                optional=True,
                purpose="scheduler-plugins PodGroups (gang scheduling)",
            )
        ]
