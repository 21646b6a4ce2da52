"""Kubernetes resource quantities ("2", "500m", "4Gi", 2.5) as exact decimals."""

from decimal import Decimal, InvalidOperation
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


def parse_quantity(value: str | int | float) -> Decimal:
    """The numeric value of a quantity; raises QuantityError naming the bad text."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    text = value.strip()
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"):
        if text.endswith(suffix):
            number, multiplier = text[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        number, multiplier = text, Decimal(1)
    try:
        return Decimal(number) * multiplier
    except InvalidOperation as err:
        raise QuantityError(f"quantities must match the regular expression: {value!r}") from err


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
