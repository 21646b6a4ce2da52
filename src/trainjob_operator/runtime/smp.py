"""Strategic merge patch over a JobSet spec, with the merge keys of JobSet v0.12 and core/v1
(docs/upstream-behaviour.md#runtime-patches).

Lists named in MERGE_KEYS merge element-wise by that key (patched elements in place, new ones appended);
every other list, `tolerations` included, is replaced. Maps merge recursively; a `null` in the patch
deletes the key, as in Kubernetes.
"""

from typing import Any, Final

MERGE_KEYS: Final[dict[str, str]] = {
    "replicatedJobs": "name",
    "dependsOn": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "ports": "containerPort",
    "resourceClaims": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "claims": "name",
}


def merge(original: Any, patch: Any, field: str | None = None) -> Any:
    """The strategic merge of `patch` onto `original`; neither input is modified."""
    if isinstance(patch, dict) and isinstance(original, dict):
        result = dict(original)
        for key, value in patch.items():
            if value is None:
                result.pop(key, None)
            elif key in result:
                result[key] = merge(result[key], value, key)
            else:
                result[key] = value
        return result
    if isinstance(patch, list) and isinstance(original, list) and field in MERGE_KEYS:
        return _merge_list(original, patch, MERGE_KEYS[field], field)
    return patch


def _merge_list(original: list[Any], patch: list[Any], key: str, field: str) -> list[Any]:
    result = list(original)
    positions = {item.get(key): i for i, item in enumerate(result) if isinstance(item, dict)}
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            result.append(item)
            continue
        at = positions.get(item[key])
        if at is None:
            positions[item[key]] = len(result)
            result.append(item)
        else:
            result[at] = merge(result[at], item, None)
    return result
