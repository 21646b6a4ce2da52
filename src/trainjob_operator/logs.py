"""structlog for our code and kopf's stdlib logging alike: JSON in production, console for people."""

import logging
import sys
from typing import Any

import structlog

SECRET_KEYS = frozenset({"data", "stringData", "ssh-privatekey", "token", "tls.key"})


def _redact(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Secret material never reaches a log line, whoever tried to log it."""
    for key in list(event):
        if key in SECRET_KEYS:
            event[key] = "<redacted>"
    return event


def configure(fmt: str = "json", level: str = "INFO") -> None:
    renderer: Any = structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact,
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf is chatty at INFO about every handler call; keep its warnings and errors.
    logging.getLogger("kopf").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def get(name: str = "trainjob_operator") -> Any:
    return structlog.get_logger(name)
