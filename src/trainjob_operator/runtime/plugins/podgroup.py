"""What the CoScheduling and Volcano PodGroups share: gang size and summed resources
(docs/upstream-behaviour.md#gang-scheduling)."""

from decimal import Decimal
from typing import Any

from ..info import RuntimeInfo
from ..quantity import format_quantity
from ..resources import pod_requests

BINARY_RESOURCES = ("memory", "ephemeral-storage", "hugepages")


def min_member(info: RuntimeInfo) -> int:
    """Σ PodSet counts over every replicated job, initializers included; template replicas not multiplied."""
    return sum(p.count for p in info.pod_sets)


def min_resources(info: RuntimeInfo) -> dict[str, Any]:
    total: dict[str, Decimal] = {}
    for pod_set in info.pod_sets:
        for name, value in pod_requests(pod_set.job.template.spec.template.spec).items():
            total[name] = total.get(name, Decimal(0)) + value * pod_set.count
    return {
        name: format_quantity(value, binary=name.startswith(BINARY_RESOURCES)) for name, value in sorted(total.items())
    }
