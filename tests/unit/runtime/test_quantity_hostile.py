"""Hostile quantities (`runtime/quantity.py`) raise only QuantityError (a crash signature of the fault run)."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob_operator.runtime.quantity import QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    "text",
    [
        "Infinity",
        "-Infinity",
        "NaN",
        "sNaN",
        "inf",
        float("inf"),
        float("nan"),
        "1e999999999",
        "1e",
        "e5",
        "",
        "1Kii",
        "+-1",
        "1 Gi",
        "0x10",
        "1_000",
        "999999999999999999999999999999999Ei",
        True,
        None,
        [1],
    ],
)
def test_bad_quantities_raise_only_quantity_error(text: Any) -> None:
    with pytest.raises(QuantityError, match="quantities must match"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", "2"),
        ("500m", "500m"),
        ("4Gi", "4294967296"),
        ("1.5", "1500m"),
        ("1e3", "1000"),
        (".5", "500m"),
        (2.5, "2500m"),
        ("+3k", "3000"),
        ("1E2", "100"),
    ],
)
def test_good_quantities(text: Any, value: str) -> None:
    assert format_quantity(parse_quantity(text)) == value
