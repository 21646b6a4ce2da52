"""JSON text fast: orjson (a C/Rust encoder) where it is installed, the standard library otherwise.

The fast path never changes a byte of what is produced: `indented` is exactly `json.dumps(value, indent=2)` (ASCII
only, `\\uXXXX` escapes, Python's float spelling) and falls back to it whenever orjson would spell something
differently (non-ASCII text and DEL, floats in exponent form, a null that may be a NaN, integers beyond 64 bits,
keys that are not strings).
`compact`/`loads` are for the operator's own caches, where only the value round trip matters.
"""

import json
import re
from typing import Any, Final

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency; a source install without it still works
    _orjson = None

FAST: Final = _orjson is not None
"""True when orjson is installed and used."""

# A number token in exponent form (json writes 1e+16, orjson 1e16): anything like it anywhere, even inside a string,
# sends the value down the standard library's path. A false alarm only costs speed.
_EXPONENT = re.compile(rb"[0-9][eE][-+0-9]")


def indented(value: Any, fast: bool = True) -> str:
    """`json.dumps(value, indent=2)`, byte for byte."""
    if fast and _orjson is not None:
        try:
            data = _orjson.dumps(value, option=_orjson.OPT_INDENT_2)
        except TypeError:  # an integer beyond 64 bits, a key that is not a string, a type orjson does not know
            pass
        else:
            # orjson writes NaN and infinities as null where json writes NaN/Infinity: any null goes the slow way;
            # json escapes DEL (0x7f) with the non-ASCII characters, orjson does not.
            if data.isascii() and b"\x7f" not in data and b"null" not in data and not _EXPONENT.search(data):
                return data.decode("ascii")
    return json.dumps(value, indent=2)


def compact(value: Any) -> bytes:
    """Compact JSON (UTF-8) of a JSON-like value: what the caches keep."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value)
        except TypeError:
            pass
    return json.dumps(value, separators=(",", ":")).encode()


def loads(data: bytes | str) -> Any:
    if _orjson is not None:
        return _orjson.loads(data)
    return json.loads(data)
