"""Kubernetes resource quantities ("2", "500m", "4Gi", 2.5) as exact decimals."""

import math
import re
from decimal import Decimal
from functools import lru_cache
from typing import Final

_SUFFIXES: Final = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


class QuantityError(ValueError):
    pass


_NUMBER: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_EXPONENT: Final = re.compile(r"[eE][+-]?[0-9]{1,3}")
LIMIT: Final = Decimal(10) ** 30
"""Beyond any real quantity (Kubernetes caps at 2^63 milli-units): refused rather than computed with."""


def _bad(value: object) -> QuantityError:
    return QuantityError(
        f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}"
    )


def parse_quantity(value: str | int | float) -> Decimal:
    """The numeric value of a quantity; raises QuantityError naming the bad text (never another error)."""
    if type(value) is str or type(value) is int:  # the common, hashable kinds: remembered (a Decimal is immutable)
        return _parse_remembered(value)
    return _parse(value)


@lru_cache(maxsize=4096, typed=True)
def _parse_remembered(value: str | int) -> Decimal:
    return _parse(value)


def _parse(value: object) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _bad(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad(value)
    text = str(value).strip()
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix) and _NUMBER.fullmatch(text[: -len(suffix)]):
            number, multiplier = text[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        match = _NUMBER.match(text)
        if match is None or (match.end() < len(text) and not _EXPONENT.fullmatch(text[match.end() :])):
            raise _bad(value)
        number, multiplier = text, Decimal(1)
    try:
        result = Decimal(number) * multiplier
    except ArithmeticError as err:  # decimal's InvalidOperation, Overflow
        raise _bad(value) from err
    if not result.is_finite() or abs(result) > LIMIT:
        raise _bad(value)
    return result


def format_quantity(value: Decimal, binary: bool = False) -> str:
    """A canonical-enough text for a summed quantity (integers plain, binary units for memory-like sums)."""
    if binary and value == value.to_integral_value() and value > 0:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _SUFFIXES[suffix]
            if value % unit == 0:
                return f"{int(value / unit)}{suffix}"
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return str(value.normalize())
