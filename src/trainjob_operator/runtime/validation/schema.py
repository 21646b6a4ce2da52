"""The CRD schema as the API server applies it: pydantic's errors in the API server's words, the object name's own
check, and the Quantity format of every resources map."""

import math
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ...api import rules
from .. import names
from ..errors import ErrorType, FieldError, invalid, required
from ..quantity import QuantityError, parse_quantity

M = TypeVar("M", bound=BaseModel)


def _path(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in ("function-after", "union") or "[" in str(part):
            continue
        else:
            text += f".{part}" if text else str(part)
    return text


def _schema_error(error: Any) -> FieldError:
    """A pydantic error in the words the API server uses for the same schema violation."""
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and ("[" in p or p in ("str", "int", "float"))))
    path, kind, ctx, value = _path(loc), error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "missing":
        return required(path)
    if kind in ("greater_than_equal", "greater_than"):
        return invalid(path, value, f"{path} in body should be greater than or equal to {ctx.get('ge', ctx.get('gt'))}")
    if kind in ("less_than_equal", "less_than"):
        return invalid(path, value, f"{path} in body should be less than or equal to {ctx.get('le', ctx.get('lt'))}")
    if kind == "string_too_long":
        return FieldError(path, ErrorType.TOO_LONG, f"may not be more than {ctx.get('max_length')} bytes")
    if kind == "string_too_short":
        return invalid(path, value, f"{path} in body should be at least {ctx.get('min_length')} chars long")
    if kind == "too_long":
        return FieldError(
            path, ErrorType.TOO_MANY, f"{ctx.get('actual_length')}: must have at most {ctx.get('max_length')} items"
        )
    if kind == "too_short":
        size = len(value) if isinstance(value, list | dict) else value
        return invalid(path, size, f"{path} in body should have at least {ctx.get('min_length')} items")
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", '"').replace(" or ", ", ")
        return FieldError(path, ErrorType.NOT_SUPPORTED, f"supported values: {expected}", value)
    type_names = {
        "int_type": "integer",
        "string_type": "string",
        "bool_type": "boolean",
        "list_type": "array",
        "dict_type": "object",
        "model_type": "object",
        "float_type": "number",
        "int_from_float": "integer",
    }
    if kind in type_names:
        return invalid(
            path, _json_type(value), f'{path} in body must be of type {type_names[kind]}: "{_json_type(value)}"'
        )
    return invalid(path, value, error.get("msg", "invalid"))


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "object"


# Schema errors after which the API server does not evaluate CEL rules (it says so in one extra error).
_CEL_BLOCKING = ("missing", "literal_error", "string_too_long", "too_long", "_type", "_parsing", "int_from_float")
CEL_SKIPPED = FieldError(
    "<nil>",
    ErrorType.INVALID,
    "some validation rules were not checked because the object "
    "was invalid; correct the existing errors to complete validation",
    None,
)


def _blocks_cel(kind: str) -> bool:
    return any(kind == k or (k.startswith("_") and kind.endswith(k)) for k in _CEL_BLOCKING)


def schema_errors(model: type[M], raw: Any) -> tuple[M | None, list[FieldError], bool]:
    """The typed object or the schema errors, and whether those errors keep CEL rules from running."""
    if not isinstance(raw, dict):
        return None, [invalid("<root>", _json_type(raw), "the object must be a mapping")], True
    try:
        return model.model_validate(raw), [], False
    except ValidationError as err:
        unique: dict[str, FieldError] = {}
        blocking = False
        for e in err.errors():
            fe = _schema_error(e)
            unique.setdefault(str(fe), fe)
            blocking = blocking or _blocks_cel(e["type"])
        return None, list(unique.values()), blocking


def parse(model: type[M], raw: Any) -> tuple[M | None, list[FieldError]]:
    """The typed object, or the schema errors that stop the API server from storing it."""
    parsed, errors, _ = schema_errors(model, raw)
    return parsed, errors


def object_name_errors(raw: dict[str, Any]) -> list[FieldError]:
    """The API server's own check of a custom resource's name: present (or to be generated), a DNS-1123 subdomain."""
    metadata = raw.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not name and not (isinstance(metadata, dict) and metadata.get("generateName")):
        return [required("metadata.name", "name or generateName is required")]
    if isinstance(name, str) and name and not names.is_dns1123_subdomain(name):
        return [invalid("metadata.name", name, names.DNS1123_SUBDOMAIN_MESSAGE)]
    return []


_QUANTITY = re.compile(rules.QUANTITY_PATTERN)
_QUANTITY_MAPS = {
    ("resources", "requests"),
    ("resources", "limits"),
    ("resourcesPerNode", "requests"),
    ("resourcesPerNode", "limits"),
}


def quantity_errors(raw: Any, path: str = "", parent: str = "", depth: int = 0) -> list[FieldError]:
    """The CRD's Quantity pattern (and int64 range) on every resources map: what the API server refuses before any
    plugin computes with the values."""
    errors: list[FieldError] = []
    if depth > 60:
        return errors
    if isinstance(raw, dict):
        for key, value in raw.items():
            if not isinstance(value, dict | list):
                continue
            where = f"{path}.{key}" if path else str(key)
            if ((parent, key) in _QUANTITY_MAPS or key == "overhead") and isinstance(value, dict):
                for name, quantity in value.items():
                    errors += _quantity_error(f"{where}.{name}", quantity)
            else:
                errors += quantity_errors(value, where, str(key), depth + 1)
    elif isinstance(raw, list):
        for index, value in enumerate(raw):
            if isinstance(value, dict | list):
                errors += quantity_errors(value, f"{path}[{index}]", parent, depth + 1)
    return errors


def _quantity_error(path: str, value: Any) -> list[FieldError]:
    if isinstance(value, str):
        if not _QUANTITY.match(value):
            return [invalid(path, value, f"{path} in body should match '{_QUANTITY.pattern}'")]
        try:
            parse_quantity(value)
        except QuantityError:
            return [invalid(path, value, "out of range")]
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return [invalid(path, value, "must be a 64-bit integer")]
    if isinstance(value, float) and not math.isfinite(value):
        return [invalid(path, str(value), "must be a finite number")]
    return []
