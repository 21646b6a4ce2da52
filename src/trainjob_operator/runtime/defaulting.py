"""The TrainJob mutating webhook: stamp `runtimePatches[].time` (spec §7.1). Pure: the clock is an argument."""

from typing import Any


def _without_time(patch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in patch.items() if k != "time"}


def stamp_patch_times(new: dict[str, Any], old: dict[str, Any] | None, now: str) -> list[dict[str, Any]] | None:
    """The runtimePatches list with times stamped, or None when nothing changes.

    CREATE: a patch without a time gets `now`. UPDATE: a manager already present keeps its old time when its
    patch is unchanged (time aside), else gets `now`; a new manager keeps a given time or gets `now`.
    """
    patches = (new.get("spec") or {}).get("runtimePatches")
    if not isinstance(patches, list):
        return None
    previous: dict[str, dict[str, Any]] = {}
    if old is not None:
        for patch in (old.get("spec") or {}).get("runtimePatches") or []:
            if isinstance(patch, dict) and "manager" in patch:
                previous[patch["manager"]] = patch
    stamped = []
    for patch in patches:
        if not isinstance(patch, dict):
            stamped.append(patch)
            continue
        before = previous.get(patch.get("manager", ""))
        if before is None:
            time = patch.get("time") or now
        elif _without_time(before) == _without_time(patch):
            time = before.get("time") or now
        else:
            time = now
        stamped.append({**patch, "time": time})
    return stamped if stamped != patches else None
