"""Structural pruning: drop the fields a CRD's structural schema does not know, as the API server does.

The API server silently removes unknown fields of a custom resource before storing it (`kubectl` with
`--validate=strict`/`warn` names each one). The operator only ever sees stored, already pruned objects; the
offline CLI reads files, so it prunes them itself with the same schema (the generated CRD's
`openAPIV3Schema`) and reports the paths, in `kubectl`'s words.
"""

import copy
from typing import Any

Schema = dict[str, Any]

#: Top-level fields the API server handles itself (`metadata` is decoded as ObjectMeta, not pruned by schema).
_ROOT_FIELDS = frozenset({"apiVersion", "kind", "metadata"})


def prune(obj: dict[str, Any], schema: Schema) -> tuple[dict[str, Any], list[str]]:
    """A pruned copy of `obj` and the paths of the removed fields (`spec.template.spec.replicatedJobs[0].x`)."""
    pruned: list[str] = []
    result = copy.deepcopy(obj)
    properties = schema.get("properties") or {}
    for key in list(result):
        if key in _ROOT_FIELDS:
            continue
        if key not in properties:
            pruned.append(key)
            del result[key]
            continue
        _prune_value(result[key], properties[key], key, pruned)
    return result, pruned


def unknown_field_warning(path: str) -> str:
    """`kubectl`'s wording for a field the server dropped (server-side field validation, Warn)."""
    return f'unknown field "{path}"'


def _prune_value(value: Any, schema: Schema, path: str, pruned: list[str]) -> None:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if properties is None and isinstance(additional, dict):
            for key, item in value.items():
                _prune_value(item, additional, f"{path}.{key}", pruned)
            return
        if schema.get("type") != "object":
            return  # a scalar or int-or-string where an object was given: a type error, not pruning
        properties = properties or {}
        for key in list(value):
            if key not in properties:
                pruned.append(f"{path}.{key}")
                del value[key]
            else:
                _prune_value(value[key], properties[key], f"{path}.{key}", pruned)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _prune_value(item, schema["items"], f"{path}[{index}]", pruned)
