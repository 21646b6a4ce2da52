"""Structural pruning: drop the fields a CRD's structural schema does not know, as the API server does.

The API server silently removes unknown fields of a custom resource before storing it (`kubectl` with
`--validate=strict`/`warn` names each one). The operator only ever sees stored, already pruned objects; the
offline CLI reads files, so it prunes them itself with the same schema (the generated CRD's
`openAPIV3Schema`) and reports the paths, in `kubectl`'s words.
"""

from typing import Any

from ..api.constants import VERSION as API_VERSION

Schema = dict[str, Any]

#: Top-level fields the API server handles itself (`metadata` is decoded as ObjectMeta, not pruned by schema).
_ROOT_FIELDS = frozenset({"apiVersion", "kind", "metadata"})


def prune(obj: dict[str, Any], schema: Schema) -> tuple[dict[str, Any], list[str]]:
    """`obj` without the fields the schema does not know, and the paths of the removed fields
    (`spec.template.spec.replicatedJobs[0].x`). `obj` is not modified: the result is a new mapping that shares with
    `obj` every value pruning leaves as it is (copied on write: only the mappings and lists on the way to a removed
    field are new)."""
    pruned: list[str] = []
    result = dict(obj)
    properties = schema.get("properties") or {}
    for key, value in obj.items():
        if key in _ROOT_FIELDS:
            continue
        if key not in properties:
            pruned.append(key)
            del result[key]
            continue
        result[key] = _pruned(value, properties[key], key, pruned)
    return result, pruned


def unknown_field_warning(path: str) -> str:
    """`kubectl`'s wording for a field the server dropped (server-side field validation, Warn)."""
    return f'unknown field "{path}"'


def strict_decoding_error(kind: str, paths: list[str]) -> str:
    """The API server's refusal of an object with unknown fields under strict field validation (kubectl's default,
    `--validate=strict`), all of them in one line, sorted, as it joins them (seen on kube-apiserver v1.36)."""
    unknown = ", ".join(unknown_field_warning(path) for path in sorted(paths))
    return f'{kind} in version "{API_VERSION}" cannot be handled as a {kind}: strict decoding error: {unknown}'


def _pruned(value: Any, schema: Schema, path: str, pruned: list[str]) -> Any:
    """`value` itself when nothing under it is unknown, else a copy of the mappings and lists that change."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if type(value) is dict or isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if properties is None and isinstance(additional, dict):
            properties, fixed = None, additional
        elif schema.get("type") != "object":
            return value  # a scalar or int-or-string where an object was given: a type error, not pruning
        else:
            properties, fixed = properties or {}, None
        out = value
        for key, item in value.items():
            item_schema = fixed if properties is None else properties.get(key)
            if item_schema is None:
                pruned.append(f"{path}.{key}")
                if out is value:
                    out = dict(value)
                del out[key]
                continue
            if type(item) is dict or type(item) is list or isinstance(item, dict | list):
                new = _pruned(item, item_schema, f"{path}.{key}", pruned)
                if new is not item:
                    if out is value:
                        out = dict(value)
                    out[key] = new
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        items_schema = schema["items"]
        changed: list[Any] | None = None
        for index, item in enumerate(value):
            if isinstance(item, dict | list):
                new = _pruned(item, items_schema, f"{path}[{index}]", pruned)
                if new is not item:
                    if changed is None:
                        changed = list(value)
                    changed[index] = new
        return value if changed is None else changed
    return value
