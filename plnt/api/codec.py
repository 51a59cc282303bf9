"""JSON bytes in and out, fast: orjson on the hot paths, the standard library as the fallback.

Serialising objects is most of the cost of GET, LIST and every watch event, and
orjson does it several times faster than `json`. orjson refuses to write integers beyond
64 bits, which a free-form field (smoke inputs) may hold, and reads them as
floats, silently losing digits; those rare documents go through `json` instead,
so no valid document is ever refused or altered. A run of 20 digits is the
cheap sign of such an integer (2**64 has 20); a false alarm only costs speed.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_TWENTY_DIGITS = b"0" * 20


def _may_hold_wide_integer(raw: bytes) -> bool:
    """A run of 20 digits somewhere in `raw` (every digit read as 0, then one search):
    a regular expression costs several times orjson's whole parse of the document."""
    return _TWENTY_DIGITS in raw.translate(_DIGITS_AS_ZERO)


def dumps(value: Any) -> bytes:
    """Compact JSON bytes."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def dumps_sorted(value: Any) -> bytes:
    """Compact JSON bytes, keys sorted: stored values stay byte-stable across writes."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def loads(data: bytes | str) -> Any:
    """Parse JSON written by `dumps` (or anything valid)."""
    raw = data.encode() if isinstance(data, str) else data
    if not _may_hold_wide_integer(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # NaN and friends, or nesting beyond orjson's 1024 levels: json decides
    try:
        return json.loads(raw)
    except RecursionError:
        # The standard library recurses per level; a refusal, not a crash of the caller.
        raise ValueError("JSON nested too deeply to decode") from None
