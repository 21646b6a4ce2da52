"""The TrainJob mutating webhook: stamp `runtimePatches[].time` (docs/upstream-behaviour.md#webhooks). Pure: the
clock is an argument."""

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
            if isinstance(patch, dict) and isinstance(patch.get("manager"), str):
                previous[patch["manager"]] = patch
    stamped = []
    for patch in patches:
        if not isinstance(patch, dict) or not isinstance(patch.get("manager", ""), str):
            stamped.append(patch)  # not a patch: left to the schema and the validating webhook, which name the field
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


# Spec fields newer than v2.2's API (issue 13). Clients built against older Trainer types drop them when they PUT
# the whole object back; Kueue v0.19 (it vendors Trainer v2.2.1) does exactly that when it admits or stops a job.
FIELDS_OLD_CLIENTS_DROP = ("ttlSecondsAfterFinished", "startupDeadlineSeconds")


def keep_newer_fields(new: dict[str, Any], old: dict[str, Any] | None, full_update: bool) -> list[dict[str, Any]]:
    """JSON patch ops restoring the spec fields an UPDATE (a PUT, `full_update`) omitted but the stored TrainJob
    has. A field is removed with a patch (`kubectl patch`/`apply`), never by leaving it out of a PUT."""
    if not full_update or old is None:
        return []
    old_spec, new_spec = old.get("spec") or {}, new.get("spec")
    if not isinstance(new_spec, dict):
        return []
    return [
        {"op": "add", "path": f"/spec/{name}", "value": old_spec[name]}
        for name in FIELDS_OLD_CLIENTS_DROP
        if name in old_spec and name not in new_spec
    ]
