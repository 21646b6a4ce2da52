"""The shell side of `DeclaresReads`: performs the reads the plugins declared and hands the results to the core."""

from collections.abc import Iterable
from typing import Any

from ..k8s.client import ApiError, KubeClient
from ..logs import get
from ..runtime.errors import printable
from ..runtime.observed import Read

log = get("trainjob_operator.reads")


async def perform(client: KubeClient, reads: Iterable[Read]) -> dict[Read, tuple[dict[str, Any], ...] | None]:
    """Each declared read, one request each: the objects found, or None when the API refused or could not be
    reached (logged; the checks that need it are skipped, as they would be for an unknown cluster)."""
    results: dict[Read, tuple[dict[str, Any], ...] | None] = {}
    for read in reads:
        try:
            results[read] = await _one(client, read)
        except (ApiError, OSError, TimeoutError) as err:
            log.warning(
                "cannot read what a plugin declared; the checks that need it are skipped",
                kind=read.kind,
                name=printable(read.name or ""),
                error=str(err),
            )
            results[read] = None
    return results


async def _one(client: KubeClient, read: Read) -> tuple[dict[str, Any], ...]:
    if read.name is not None:
        found = await client.get(read.api_version, read.kind, read.name, read.namespace)
        return (found,) if found is not None else ()
    if read.label_selector is not None:
        return tuple(await client.list(read.api_version, read.kind, read.namespace, label_selector=read.label_selector))
    return tuple(await client.list(read.api_version, read.kind, read.namespace))
