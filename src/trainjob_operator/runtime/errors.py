"""Field errors in the shape of Kubernetes' field.ErrorList, and the build error of the pipeline."""

import json
import re
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
    DUPLICATE = "Duplicate value"
    PLAIN = ""
    """An error without a field path (upstream returns a bare Go error)."""


_NO_VALUE = object()


def render_value(value: Any) -> str:
    """As apimachinery v0.36 prints a field error's value: strings quoted, numbers plain, objects and lists
    as compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # a circular or absurdly deep value: name its type instead
        return f"<{type(value).__name__}>"


@dataclass(frozen=True)
class FieldError:
    path: str
    type: ErrorType
    detail: str
    value: Any = field(default=_NO_VALUE, compare=False)

    @property
    def message(self) -> str:
        """Everything after the path, as `kubectl` shows it."""
        if (
            self.type in (ErrorType.INVALID, ErrorType.NOT_SUPPORTED, ErrorType.DUPLICATE)
            and self.value is not _NO_VALUE
        ):
            value = render_value(self.value)
            return f"{self.type.value}: {value}: {self.detail}" if self.detail else f"{self.type.value}: {value}"
        if self.detail:
            return f"{self.type.value}: {self.detail}"
        return self.type.value

    def __str__(self) -> str:
        if self.type is ErrorType.PLAIN:
            return self.detail
        return f"{self.path}: {self.message}"


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, ErrorType.INVALID, detail, value)


def plain(detail: str) -> FieldError:
    return FieldError("", ErrorType.PLAIN, detail)


def invalid_rule(path: str, detail: str) -> FieldError:
    """A CEL rule on an object, a list or the root fails: Kubernetes prints no value."""
    return FieldError(path, ErrorType.INVALID, detail)


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


def describe(err: BaseException, limit: int = 900) -> str:
    """An unexpected error as one line for a person (a status message, a refusal): its type and its text."""
    text = printable(" ".join(str(err).split()) or repr(err))
    return f"{type(err).__name__}: {text}"[:limit]


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """`text` safe to show a person on one line: every control character (C0 with newline and carriage return, DEL,
    C1), line and paragraph separator and bidirectional override is written as its escape, as Go's `%q` writes it
    (`\\r`, `\\x1b`, `\\u009b`, `\\u202e`); nothing else changes, so printing it twice changes nothing more.

    Every message that echoes user input goes through it where it is emitted (CLI errors, log lines, Events, status
    condition messages, webhook denials): a name like "evil\\r\\x1b[2Jname" must neither clear a terminal nor turn
    one line into two."""
    return text if _UNPRINTABLE.search(text) is None else _UNPRINTABLE.sub(_escape, text)
