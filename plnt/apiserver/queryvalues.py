"""Query values to typed values, as kube-apiserver's parameter codec converts them, but strictly.

kube decodes a request's query into its options object (`DeleteOptions`,
`ListOptions`, ...) through generated `url.Values` conversions: the first value of a
repeated parameter wins (only `dryRun` keeps every value), integers go through Go's
`strconv.ParseInt` (base 10, optional sign, 64 bits) and a value that does not parse
is a 400 BadRequest before anything is done. plnt converts the same way and names
the parameter in the message, in kube's field-error form with Go's own text:
`gracePeriodSeconds: Invalid value: "abc": strconv.ParseInt: parsing "abc": invalid syntax`.

Booleans are where plnt is stricter than kube. kube reads every value other than `0`
and `false` (any case) as true, so `orphanDependents=abc` orphans and `watch=yes`
watches. Such a value acts on a typo, so plnt accepts `true`/`false` (any case), `1`,
`0` and the bare parameter (`?watch`, true as in kube), and refuses anything else
with a 400 naming the parameter. `pretty` takes Go's `strconv.ParseBool` values,
which is what kube parses it with.

Unknown parameters are ignored, as kube ignores them (client-go adds `timeout=32s`).
Exceptions: `errors.BadRequest` only.
"""

from __future__ import annotations

import re

from multidict import MultiMapping

from plnt.api import errors
from plnt.registry.labelnames import go_quote

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1

_DECIMAL = re.compile(r"[+-]?[0-9]+")
_UNSIGNED = re.compile(r"[0-9]+")
_TRUE = frozenset({"true", "1", ""})
_FALSE = frozenset({"false", "0"})
_GO_PARSE_BOOL = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}


def invalid(name: str, value: str, detail: str) -> errors.BadRequest:
    """The 400 of a parameter whose value does not convert, naming the parameter."""
    body = f"Invalid value: {go_quote(value)}: {detail}"
    return errors.BadRequest(
        f"{name}: {body}", causes=[errors.Cause("FieldValueInvalid", body, name)]
    )


def first(query: MultiMapping[str], name: str) -> str | None:
    """The first value of `name` (kube's rule for repeated parameters), None when absent."""
    values = query.getall(name, [])
    return values[0] if values else None


def integer(query: MultiMapping[str], name: str) -> int | None:
    """A 64-bit signed decimal, as Go's `strconv.ParseInt(value, 10, 64)` reads it."""
    value = first(query, name)
    if value is None:
        return None
    if not _DECIMAL.fullmatch(value):
        raise invalid(name, value, f"strconv.ParseInt: parsing {go_quote(value)}: invalid syntax")
    number = int(value)
    if not INT64_MIN <= number <= INT64_MAX:
        raise invalid(
            name, value, f"strconv.ParseInt: parsing {go_quote(value)}: value out of range"
        )
    return number


def resource_version(query: MultiMapping[str], name: str = "resourceVersion") -> str:
    """`""`, `"0"` or a 64-bit unsigned decimal: the only resourceVersions storage can mean.

    The message is kube's storage error for any other value
    (`resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`).
    """
    value = first(query, name) or ""
    if value in ("", "0"):
        return value
    if not _UNSIGNED.fullmatch(value):
        raise invalid(name, value, f"strconv.ParseUint: parsing {go_quote(value)}: invalid syntax")
    if int(value) > UINT64_MAX:
        raise invalid(
            name, value, f"strconv.ParseUint: parsing {go_quote(value)}: value out of range"
        )
    return value


def boolean(query: MultiMapping[str], name: str) -> bool | None:
    """`true`/`false` in any case, `1`, `0`, or the bare parameter (true); None when absent."""
    value = first(query, name)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise invalid(name, value, "must be a boolean: true, false, 1 or 0")


def pretty(query: MultiMapping[str]) -> bool:
    """`pretty`, with the values Go's `strconv.ParseBool` knows (kube parses it so)."""
    value = first(query, "pretty")
    if not value:
        return False
    if value not in _GO_PARSE_BOOL:
        raise invalid(
            "pretty", value, f"strconv.ParseBool: parsing {go_quote(value)}: invalid syntax"
        )
    return _GO_PARSE_BOOL[value]
