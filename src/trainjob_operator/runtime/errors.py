"""Field errors in the shape of Kubernetes' field.ErrorList, and the build error of the pipeline."""

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ErrorType(Enum):
    INVALID = "Invalid value"
    FORBIDDEN = "Forbidden"
    REQUIRED = "Required value"
    NOT_SUPPORTED = "Unsupported value"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"
    INTERNAL = "Internal error"
    NOT_FOUND = "Not found"


_NO_VALUE = object()


def render_value(value: Any) -> str:
    """Kubernetes prints strings quoted and everything else plainly."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


@dataclass(frozen=True)
class FieldError:
    path: str
    type: ErrorType
    detail: str
    value: Any = field(default=_NO_VALUE, compare=False)

    @property
    def message(self) -> str:
        """Everything after the path, as `kubectl` shows it."""
        if self.type in (ErrorType.INVALID, ErrorType.NOT_SUPPORTED) and self.value is not _NO_VALUE:
            return f"{self.type.value}: {render_value(self.value)}: {self.detail}"
        if self.detail:
            return f"{self.type.value}: {self.detail}"
        return self.type.value

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, ErrorType.INVALID, detail, value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, ErrorType.FORBIDDEN, detail)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, ErrorType.REQUIRED, detail)


def aggregate(errors: list[FieldError]) -> str:
    """Kubernetes' aggregate text: one error plainly, several as `[e1, e2]`."""
    if len(errors) == 1:
        return str(errors[0])
    return "[" + ", ".join(str(e) for e in errors) + "]"


@dataclass(frozen=True)
class Validation:
    """Warnings and field errors collected from every validator."""

    errors: tuple[FieldError, ...] = ()
    warnings: tuple[str, ...] = ()

    def __add__(self, other: "Validation") -> "Validation":
        return Validation(self.errors + other.errors, self.warnings + other.warnings)

    @property
    def ok(self) -> bool:
        return not self.errors


class BuildError(Exception):
    """The pipeline cannot build the objects of a TrainJob; the text is meant for the TrainJob's status."""
