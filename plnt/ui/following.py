"""Following a collection as kube clients do: list, then watch from the list's revision.

`follow` yields `("RESET", items)` once the list is in (and again whenever the watch
had to start over from a fresh list: its revision expired, 410), then the watch's events
as `(type, object)`. A watch the server ends (its timeout) is resumed from the last
revision seen, so the caller sees one endless stream. Errors other than 410 (a 403 from
the user's RBAC, the server gone) are raised to the caller, unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from plnt.client import Gone, PlntClient

Event = tuple[str, Any]


async def follow(
    client: PlntClient, path: str, *, params: Mapping[str, str | int | bool] | None = None
) -> AsyncIterator[Event]:
    """The collection at `path`: a RESET with every item, then its watch events."""
    query: dict[str, str | int | bool] = dict(params or {})
    while True:
        listed = (await client.request("GET", path, params=query)).json() or {}
        yield "RESET", list(listed.get("items") or [])
        revision = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        try:
            while True:
                watch_query = {**query, "allowWatchBookmarks": True}
                if revision:
                    watch_query["resourceVersion"] = revision
                async for event in client.watch(path, params=watch_query):
                    found = (event.object.get("metadata") or {}).get("resourceVersion")
                    if found:
                        revision = str(found)
                    if event.type != "BOOKMARK":
                        yield event.type, event.object
        except Gone:
            continue


def key_of(obj: Mapping[str, Any]) -> str:
    """An object's name: the key a page keeps it under."""
    return str((obj.get("metadata") or {}).get("name", ""))


def apply(state: dict[str, dict[str, Any]], kind: str, obj: Any) -> None:
    """Keep `state` (name → object) in step with one event of `follow`."""
    if kind == "RESET":
        state.clear()
        state.update({key_of(item): item for item in obj})
    elif kind == "DELETED":
        state.pop(key_of(obj), None)
    elif kind in ("ADDED", "MODIFIED"):
        state[key_of(obj)] = obj
