"""A status write that holds against concurrent writers: read, patch with tests, read again.

A bench's record and an Invocation's whole status are written by a JSON patch that tests
the object's uid (a recreated object of the same name is another one, never written by
the old one's workflow) and its resourceVersion (nothing was written in between), then
sets what `ops` computes from the object as read. A failed test (422 naming the field
`patch`, or 409) means someone wrote in between: read and try again, a bounded number of
times. Any other 422 is the status itself refused: retrying cannot fix it.

Errors: `ApplicationError` `Conflict` (retryable) when the object kept changing for every
attempt, `InvalidStatus` (not retried) when the API refuses the status; anything else
`plnt.client.errors` raises passes through for the activity's retry policy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.exceptions import ApplicationError

from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient

JSON_PATCH = "application/json-patch+json"

Patch = list[dict[str, Any]]


def identity_tests(obj: dict[str, Any]) -> Patch:
    """Tests that `obj` is still the object read: its uid and its resourceVersion."""
    meta = obj["metadata"]
    return [
        {"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
    ]


async def send(api: PlntClient, path: str, patch: Patch) -> dict[str, Any] | None:
    """One JSON patch of `path`: the object written, or None when a test failed or the
    object was written in between (read it again). A vanished object is `NotFound`."""
    try:
        reply = await api.request("PATCH", path, json=patch, content_type=JSON_PATCH)
    except client_errors.Conflict:
        return None
    except client_errors.Invalid as error:
        if any(cause.field == "patch" for cause in error.causes):
            return None
        raise ApplicationError(
            f"the status was refused: {error}", type="InvalidStatus", non_retryable=True
        ) from error
    written: dict[str, Any] = reply.json()
    return written


async def write_read(
    api: PlntClient,
    path: str,
    read: Callable[[], Awaitable[dict[str, Any] | None]],
    ops: Callable[[dict[str, Any]], Patch],
    *,
    attempts: int,
) -> dict[str, Any] | None:
    """Read the object (None: gone, or another one), patch it with `ops(obj)` behind the
    identity tests, and again while someone writes in between; the object written, or None
    when it is gone."""
    for _ in range(attempts):
        obj = await read()
        if obj is None:
            return None
        try:
            written = await send(api, path, [*identity_tests(obj), *ops(obj)])
        except client_errors.NotFound:
            return None
        if written is not None:
            return written
    raise ApplicationError("status kept changing underneath", type="Conflict")
