"""An Invocation's status as its workflow's activities write it, and the object read back.

Every write is meant for one Invocation by identity (`invocation.InvocationRef`: a
recreated object with the same name is another call, never written by the old one's
workflow). `write` first sends one JSON patch that tests the uid and sets only the named
fields, without reading the object: a status write costs one request. When a test or a
path of it fails (another uid, no status yet), it reads the object and writes the whole
status, testing the uid and the resourceVersion, and reads again when one fails.

Errors: `plnt.client.errors` as the client raises them (the caller's retry policy
decides), and `ApplicationError` `InvalidStatus` (not retried) when the API refuses the
status itself.
"""

from __future__ import annotations

from typing import Any

from plnt.api.invocations import PLURAL
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.sagas import statuswrites
from plnt.sagas.invoking import workflow as inv

REREADS = 10


def path(api: PlntClient, ref: inv.InvocationRef, subresource: str = "") -> str:
    return api.object_path(PLURAL, ref.name, namespace=ref.namespace, subresource=subresource)


async def read(api: PlntClient, ref: inv.InvocationRef) -> dict[str, Any] | None:
    """The Invocation, or None when it is gone or was recreated (another uid)."""
    try:
        obj: dict[str, Any] = (await api.request("GET", path(api, ref))).json()
    except client_errors.NotFound:
        return None
    return obj if (obj.get("metadata") or {}).get("uid") == ref.uid else None


async def write(
    api: PlntClient, ref: inv.InvocationRef, fields: dict[str, Any], *, finished: bool = False
) -> bool:
    """Set `fields` in status (None removes one) while the Invocation is `ref`; False when
    it is gone or another one. `finished`: the end, which also copies `metadata.generation`
    to `status.observedGeneration`."""
    patch: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/uid", "value": ref.uid}]
    for key, value in fields.items():
        where = "/status/" + key.replace("~", "~0").replace("/", "~1")
        patch.append({"op": "add", "path": where, "value": value})
        if value is None:  # added first, so that the removal cannot miss
            patch.append({"op": "remove", "path": where})
    if finished:
        patch.append(
            {"op": "copy", "from": "/metadata/generation", "path": "/status/observedGeneration"}
        )
    try:
        if await statuswrites.send(api, path(api, ref, "status"), patch) is not None:
            return True
    except client_errors.NotFound:
        return False

    def whole(obj: dict[str, Any]) -> statuswrites.Patch:
        status = dict(obj.get("status") or {})
        for key, value in fields.items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
        if finished:
            status["observedGeneration"] = obj["metadata"].get("generation") or 1
        return [{"op": "add", "path": "/status", "value": status}]

    written = await statuswrites.write_read(
        api, path(api, ref, "status"), lambda: read(api, ref), whole, attempts=REREADS
    )
    return written is not None
