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
            # Both write the same tokens in the same order; where they spell one differently (non-ASCII text and DEL,
            # floats: 1e-05 / 0.00001, NaN / null), their compact forms differ too. The standard library's compact
            # encoder is its C one (the indenting one is pure Python), so the check costs a fraction of the saving.
            same = _orjson.dumps(value) == json.dumps(value, separators=(",", ":")).encode()
        except (TypeError, ValueError):  # an integer beyond 64 bits, a key that is not a string, a circular value
            same = False
        if same:
            return data.decode("ascii")
    return json.dumps(value, indent=2)


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
