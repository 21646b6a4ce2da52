"""Kubernetes quantities (`runtime/quantity.py`): parsing, the error naming the text, formatting."""

from decimal import Decimal

import pytest

from trainjob_operator.runtime.quantity import QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("4Gi", Decimal(4 * 2**30)),
        ("1k", Decimal(1000)),
        (2.5, Decimal("2.5")),
        (3, Decimal(3)),
        ("1e3", Decimal(1000)),
    ],
)
def test_parse_quantity(text: str | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


def test_bad_quantity_names_the_text() -> None:
    with pytest.raises(QuantityError, match="'lots'"):
        parse_quantity("lots")


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [
        (Decimal(102), False, "102"),
        (Decimal("0.5"), False, "500m"),
        (Decimal(408 * 2**30), True, "408Gi"),
        (Decimal(1536 * 2**20), True, "1536Mi"),
    ],
)
def test_format_quantity(value: Decimal, binary: bool, text: str) -> None:
    assert format_quantity(value, binary) == text
