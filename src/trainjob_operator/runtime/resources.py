"""Resource arithmetic the plugins share: merges, GPU/CPU detection and effective pod requests."""

import copy
import math
from decimal import Decimal

from ..api.core import Container, PodSpec, Quantity, ResourceRequirements
from .quantity import parse_quantity


def merge_resources(base: ResourceRequirements | None, overlay: ResourceRequirements) -> ResourceRequirements:
    """Strategic merge of ResourceRequirements: limits and requests per key (overlay wins), claims by name."""
    if base is None:
        # a copy that shares nothing mutable with the TrainJob's (a deep copy, without copy.deepcopy's walk)
        return overlay.model_copy(
            update={
                "limits": dict(overlay.limits) if overlay.limits is not None else None,
                "requests": dict(overlay.requests) if overlay.requests is not None else None,
                "claims": copy.deepcopy(overlay.claims) if overlay.claims else overlay.claims,
                **(copy.deepcopy(overlay.__pydantic_extra__) if overlay.__pydantic_extra__ else {}),
            }
        )
    limits = {**(base.limits or {}), **(overlay.limits or {})} or None
    requests = {**(base.requests or {}), **(overlay.requests or {})} or None
    claims = list(base.claims or [])
    names = {claim.get("name"): i for i, claim in enumerate(claims)}
    for claim in overlay.claims or []:
        at = names.get(claim.get("name"))
        if at is None:
            claims.append(dict(claim))
        else:
            claims[at] = {**claims[at], **claim}
    merged = base.model_copy()
    merged.limits, merged.requests, merged.claims = limits, requests, claims or None
    return merged


def gpu_count(resources: ResourceRequirements | None) -> int:
    """The value of the first resource whose name contains "gpu", from requests, else from limits."""
    if resources is None:
        return 0
    for source in (resources.requests, resources.limits):
        for name, value in (source or {}).items():
            if "gpu" in name.lower():
                return int(parse_quantity(value))
    return 0


def cpu_count(resources: ResourceRequirements | None) -> int:
    """CPUs rounded up (2.5 → 3, 2500m → 3); requests first, then limits; at least 1."""
    if resources is None:
        return 1
    for source in (resources.requests, resources.limits):
        value = (source or {}).get("cpu")
        if value is not None:
            cpu = parse_quantity(value)
            if cpu > 0:
                return max(1, math.ceil(cpu))
    return 1


def _add(total: dict[str, Decimal], requests: dict[str, Quantity] | None) -> None:
    for name, value in (requests or {}).items():
        total[name] = total.get(name, Decimal(0)) + parse_quantity(value)


def _requests(container: Container) -> dict[str, Quantity] | None:
    return container.resources.requests if container.resources is not None else None


def pod_requests(pod: PodSpec | None) -> dict[str, Decimal]:
    """Kubernetes' effective pod requests: max(sum of containers + sidecars, each init container on top of
    the sidecars started before it), plus overhead."""
    total: dict[str, Decimal] = {}
    if pod is None:
        return total
    for container in pod.containers:
        _add(total, _requests(container))
    sidecars: dict[str, Decimal] = {}
    for init in pod.init_containers or []:
        if init.restart_policy == "Always":
            _add(sidecars, _requests(init))
            _add(total, _requests(init))
            continue
        peak = dict(sidecars)
        _add(peak, _requests(init))
        for name, value in peak.items():
            if value > total.get(name, Decimal(0)):
                total[name] = value
    _add(total, pod.overhead)
    return total
