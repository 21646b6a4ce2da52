"""Capture what the operator's logging writes, for tests of log lines."""

import logging
from typing import Any

import pytest

from trainjob_operator import logs


def log_lines(fmt: str, emit: Any, capsys: pytest.CaptureFixture[str]) -> str:
    logs.configure(fmt, "INFO")
    emit(logs.get("test"))
    for handler in logging.getLogger().handlers:
        handler.flush()
    return capsys.readouterr().err
