"""Objects as the registry handles them: JSON maps, and `lookup` of optional nested fields.

The bottom of the registry: any of its modules may import this one, and it imports
nothing of plnt, so definitions, strategies and changes can share the `Object` type
without importing each other.
"""

from __future__ import annotations

from typing import Any

Object = dict[str, Any]


def lookup(obj: Object, *path: str) -> Any:
    """The value at `path` in a JSON object, or None where any step is missing or not a map.

    Printer columns and field selectors read optional nested fields of
    unvalidated-looking data with it, never raising.
    """
    value: Any = obj
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value
