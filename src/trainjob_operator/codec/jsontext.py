"""JSON text fast: orjson (a C/Rust encoder) where it is installed, the standard library otherwise.

The fast path never changes a byte of what is produced: `indented` is exactly `json.dumps(value, indent=2)` (ASCII
only, `\\uXXXX` escapes, Python's float spelling) and falls back to it whenever orjson would spell anything
differently.
`compact`/`loads` are for the operator's own caches, where only the value round trip matters.
"""

import json
import re
from typing import Any, Final

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; a source install without it still works
    _orjson = None

FAST: Final = _orjson is not None
"""True when orjson is installed and used."""


def indented(value: Any, fast: bool = True) -> str:
    """`json.dumps(value, indent=2)`, byte for byte."""
    if fast and _orjson is not None:
        try:
            data: bytes = _orjson.dumps(value, option=_orjson.OPT_INDENT_2)
        except (TypeError, ValueError):  # an integer beyond 64 bits, a key that is not a string, a circular value
            pass
        else:
            if _spelled_alike(data, value):
                return data.decode("ascii")
    return json.dumps(value, indent=2)


# Digits map to "0", what makes a number a float (".", "e", "E") to ".", a sign to "-", commas and line breaks to
# themselves and every other byte (letters, quotes, spaces) to "x".
_SHAPE: Final = bytes(
    ord("0")
    if chr(b).isdigit() and b < 128
    else ord(".")
    if chr(b) in ".eE"
    else ord("-")
    if chr(b) in "+-"
    else b
    if chr(b) in ",\n"
    else ord("x")
    for b in range(256)
)
_FLOAT_TOKEN: Final = re.compile(rb"0\.[0.\-]*(?:,?\n|$)")
"""In `_SHAPE`: a digit, then a fraction or an exponent, then the rest of a number up to the end of its line."""


def _has_float(data: bytes) -> bool:
    """Whether orjson's indented text `data` holds a number token with a fraction or an exponent. Every value that is
    not a string, a number among them, is the last token of its line (its comma aside), while a string ends in a
    quote and a key is followed by its value: so a float token is a digit, then `.`, `e` or `E`, then the rest of a
    number up to the end of a line, and nothing in a string looks like that (true and false end in `e` after a
    letter)."""
    return _FLOAT_TOKEN.search(data.translate(_SHAPE)) is not None


def _spelled_alike(data: bytes, value: Any) -> bool:
    """Whether orjson's `data` is what the standard library writes for `value`. They write the same tokens in the
    same order and escape every ASCII character alike (tests/unit/codec/test_jsontext.py tries each one) but DEL; they
    spell differently only non-ASCII text and DEL (orjson writes them raw: a byte >= 0x7f), floats (1e-05 / 1e-5)
    and NaN and the infinities (NaN / null). Text without such bytes, number tokens with a fraction or an exponent,
    or `null` is spelled alike (a `null` only costs the exact check: the standard library's compact encoder is its C
    one, the indenting one is pure Python)."""
    if data.isascii() and b"\x7f" not in data and b"null" not in data and not _has_float(data):
        return True
    try:
        return bool(_orjson.dumps(value) == json.dumps(value, separators=(",", ":")).encode())
    except (TypeError, ValueError):
        return False


def compact(value: Any) -> bytes:
    """Compact JSON (UTF-8) of a JSON-like value: what the caches keep."""
    if _orjson is not None:
        try:
            # orjson's bytes keep the 4 KiB buffer they were written into: a copy of the exact size is what a cache
            # of thousands of objects can keep (tests/unit/codec/test_jsontext.py measures it).
            return memoryview(_orjson.dumps(value)).tobytes()
        except TypeError:
            pass
    return json.dumps(value, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    if _orjson is not None:
        return _orjson.loads(data)
    return json.loads(data)
