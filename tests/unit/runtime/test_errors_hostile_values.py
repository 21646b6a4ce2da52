"""Error values of any type render (`runtime/errors.py`; a crash signature of the fault run)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from trainjob_operator.runtime.errors import invalid, render_value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), '"2026-01-01 00:00:00+00:00"', id="a datetime"),
        pytest.param(b"\x00", "\"b'\\\\x00'\"", id="bytes"),
        pytest.param({"a": {1, 2}}.get("a"), '"{1, 2}"', id="a set"),
    ],
)
def test_error_values_of_any_type_render(value: Any, text: str) -> None:
    assert render_value(value) == text
    assert str(invalid("spec.x", value, "bad")) == f"spec.x: Invalid value: {text}: bad"
