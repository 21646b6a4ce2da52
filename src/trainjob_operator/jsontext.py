"""JSON text fast: orjson (a C/Rust encoder) where it is installed, the standard library otherwise.

The fast path never changes a byte of what is produced: `indented` is exactly `json.dumps(value, indent=2)` (ASCII
only, `\\uXXXX` escapes, Python's float spelling) and falls back to it whenever orjson would spell anything
differently.
`compact`/`loads` are for the operator's own caches, where only the value round trip matters.
"""

import json
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


# Every byte maps to itself except digits (to "0"), the characters that make a number a float (to ".") and every
# other byte that is no part of a number token's surroundings (to "x"): float tokens are then found with bytes.find.
_SHAPE: Final = bytes(
    ord("0") if chr(b).isdigit() and b < 128 else ord(".") if chr(b) in ".eE" else b if chr(b) in ' \n:"-' else ord("x")
    for b in range(256)
)


def _has_float(data: bytes) -> bool:
    """Whether orjson's indented text `data` holds a number token with a fraction or an exponent. A number token
    starts a line (an array element) or follows `": ` (an object value); digits followed by `.`, `e` or `E` inside
    a string (image tags, versions) are passed over, and a string's `\": ` only costs the exact check."""
    shape = data.translate(_SHAPE)
    at = shape.find(b"0.")
    while at >= 0:
        start = at
        while start > 0 and shape[start - 1] == 48:  # "0": the digits before
            start -= 1
        if start > 0 and shape[start - 1] == 45:  # "-"
            start -= 1
        if start == 0 or shape[start - 3 : start] == b'": ':
            return True
        line = shape.rfind(b"\n", 0, start)
        if shape[line + 1 : start].strip(b" ") == b"":
            return True
        at = shape.find(b"0.", at + 2)
    return False


def _spelled_alike(data: bytes, value: Any) -> bool:
    """Whether orjson's `data` is what the standard library writes for `value`. They write the same tokens in the
    same order; they spell differently only non-ASCII text and DEL (orjson writes them raw: a byte >= 0x7f), floats
    (1e-05 / 1e-5) and NaN and the infinities (NaN / null). Text without such bytes, number tokens with a fraction
    or an exponent, `null` or `\\u` escapes is spelled alike (a `null` or an escape only costs the exact check: the
    standard library's compact encoder is its C one, the indenting one is pure Python)."""
    if data.isascii() and b"\x7f" not in data and b"null" not in data and b"\\u" not in data and not _has_float(data):
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
            # of thousands of objects can keep (tests/unit/test_jsontext.py measures it).
            return memoryview(_orjson.dumps(value)).tobytes()
        except TypeError:
            pass
    return json.dumps(value, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    if _orjson is not None:
        return _orjson.loads(data)
    return json.loads(data)
