"""structlog for our code and kopf's stdlib logging alike: JSON in production, console for people.

Secret material never reaches a log line: fields named like Secret data are replaced, and every text that is
logged (messages, field values, formatted exceptions) is scrubbed of PEM private keys, their base64 form and
`key: value` pairs of Secret keys. Its control characters are escaped (`runtime.errors.printable`): a user's name
cannot move the cursor or clear the terminal of whoever reads the log. Exceptions are rendered as plain tracebacks
(never with local variables, which could hold Secret data and take seconds to print), capped in length.
"""

import logging
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from .runtime.errors import printable

SECRET_KEYS = frozenset(
    {"data", "stringData", "ssh-privatekey", "ssh-publickey", "token", "tls.key", "ca.key", "private_key", "privateKey"}
)
REDACTED = "<redacted>"
MAX_TEXT = 8000
"""A logged text (a traceback included) longer than this is cut: a log line must never block the operator."""

_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL)
_PEM_B64 = re.compile(r"LS0tLS1CRUdJT[A-Za-z0-9+/=\\n]*")  # base64 of "-----BEGIN": Secret data as stored
_SECRET_PAIR = re.compile(
    r"""(["']?(?:ssh-privatekey|tls\.key|ca\.key|token|stringData|private_?[kK]ey)["']?\s*[:=]\s*)"""
    r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,}\]]+)"""
)


def scrub(text: str) -> str:
    """`text` without private keys or Secret values, and not longer than MAX_TEXT."""
    if "PRIVATE KEY" in text:
        text = _PEM.sub(REDACTED, text)
    if "LS0tLS1CRUdJT" in text:
        text = _PEM_B64.sub(REDACTED, text)
    text = _SECRET_PAIR.sub(lambda m: m.group(1) + REDACTED, text)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"... ({len(text) - MAX_TEXT} characters cut)"
    return text


def _clean(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return printable(scrub(value))
    if depth > 8:
        return "<nested>"
    if isinstance(value, dict):
        return {k: REDACTED if k in SECRET_KEYS else _clean(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v, depth + 1) for v in value]
    return value


def _redact(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Secret material never reaches a log line, whoever tried to log it."""
    for key in list(event):
        if key in SECRET_KEYS:
            event[key] = REDACTED
        elif key == "exception" and isinstance(event[key], str):  # a traceback keeps its lines, each one escaped
            event[key] = "\n".join(printable(line) for line in scrub(event[key]).split("\n"))
        elif not key.startswith("_"):
            event[key] = _clean(event[key])
    return event


def error_fields(err: BaseException) -> dict[str, str]:
    """The fields every logged failure carries: its type and its (scrubbed) message."""
    try:
        text = str(err) or repr(err)
    except Exception:  # some exceptions cannot print themselves (half-built aiohttp errors)
        text = object.__repr__(err)
    return {"error_type": type(err).__name__, "error": scrub(text)}


def colours_for(stream: Any) -> bool:
    """Colour codes only for a person at a terminal: a log file or a pipe gets plain text (and NO_COLOR is honoured,
    no-color.org)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty()) and not os.environ.get("NO_COLOR")


class RetriedRequests(logging.Filter):
    """kopf logs every request it will retry at error level. A retried 429 (API Priority and Fairness, or "storage is
    (re)initializing" while a new CRD's watch cache fills, seen at start-up) is routine: info; another retried failure
    a warning. The last attempt ("escalating") stays an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and "failed; will retry" in str(record.msg):
            level = logging.INFO if "APITooManyRequestsError" in str(record.msg) else logging.WARNING
            record.levelno, record.levelname = level, logging.getLevelName(level)
        return True


def configure(fmt: str = "json", level: str = "INFO") -> None:
    renderer: Any = structlog.processors.JSONRenderer()
    if fmt != "json":  # plain tracebacks: never rich's or better-exceptions' dumps of local variables
        renderer = structlog.dev.ConsoleRenderer(
            colors=colours_for(sys.stderr), exception_formatter=structlog.dev.plain_traceback
        )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,  # the traceback becomes a plain text field, scrubbed below
        _redact,
    ]
    structlog.configure(
        # A line below the logger's level is dropped before the processors run (issue 37: "JobSet built" per new
        # TrainJob took 1.4% of the operator's CPU in a burst at level WARNING, then was dropped by logging anyway).
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared[:-2], structlog.stdlib.ExtraAdder(), *shared[-2:]],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    handler.addFilter(RetriedRequests())  # on the handler: a logger's filters miss its children's records
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf is chatty at INFO about every handler call; keep its warnings and errors.
    logging.getLogger("kopf").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def get(name: str = "trainjob_operator") -> Any:
    return structlog.get_logger(name)


@dataclass
class Aggregator:
    """At most one line per signature per `window` seconds; the lines in between are counted, and the count goes
    out with the next line of that signature (or at `flush`). An API outage costs a few lines, not thousands."""

    window: float = 10.0
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, float] = field(default_factory=dict)
    _suppressed: dict[str, int] = field(default_factory=dict)

    def admit(self, signature: str) -> int | None:
        """None: stay quiet (counted). Otherwise log now, with this many lines suppressed since the last one."""
        now = self.clock()
        last = self._last.get(signature)
        if last is not None and now - last < self.window:
            self._suppressed[signature] = self._suppressed.get(signature, 0) + 1
            return None
        self._last[signature] = now
        if len(self._last) > 1024:  # bounded: the oldest signatures are forgotten
            for old in sorted(self._last, key=self._last.__getitem__)[:512]:
                self._last.pop(old, None)
        return self._suppressed.pop(signature, 0)
