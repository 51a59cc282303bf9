"""Invocations (`plnt.work/v1`, docs/invocations.md) through a `PlntClient`: create one,
read it, follow it until it has finished.

Functions of a client rather than methods, so `PlntClient` stays the WorkflowRun
client it is; each is one request (or one watch) and answers the server's JSON
unchanged. pydantic-free, like the rest of the client, so the CLI starts without it:
the names it needs come from `plnt.api.names`, which imports no pydantic.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from plnt.api import names
from plnt.client.clients import PlntClient

PLURAL = names.INVOCATIONS
FINISHED = names.INVOCATION_FINISHED_PHASES


def manifest(
    run: str,
    inputs: Mapping[str, Any],
    *,
    name: str | None = None,
    revision: str | int | None = None,
    timeout_seconds: int | None = None,
    ttl_seconds_after_finished: int | None = None,
) -> dict[str, Any]:
    """An Invocation of `run`; without `name`, the server generates one from `RUN-`."""
    spec: dict[str, Any] = {"workflowRun": run, "inputs": dict(inputs)}
    for key, value in (
        ("revision", revision),
        ("timeoutSeconds", timeout_seconds),
        ("ttlSecondsAfterFinished", ttl_seconds_after_finished),
    ):
        if value is not None:
            spec[key] = value
    meta = {"name": name} if name else {"generateName": f"{run}-"}
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.INVOCATION_KIND,
        "metadata": meta,
        "spec": spec,
    }


async def create(
    client: PlntClient, body: Mapping[str, Any], *, namespace: str | None = None
) -> dict[str, Any]:
    """Create the Invocation `body` (the answer names it, generated or not)."""
    path = client.collection_path(PLURAL, namespace=namespace)
    created: dict[str, Any] = (await client.request("POST", path, json=body)).json()
    return created


async def get(client: PlntClient, name: str, *, namespace: str | None = None) -> dict[str, Any]:
    """The Invocation `name`."""
    path = client.object_path(PLURAL, name, namespace=namespace)
    found: dict[str, Any] = (await client.request("GET", path)).json()
    return found


def finished(obj: Mapping[str, Any]) -> bool:
    """Whether the Invocation has ended (Succeeded, Failed or Cancelled)."""
    status = obj.get("status")
    return isinstance(status, Mapping) and status.get("phase") in FINISHED


async def until_finished(
    client: PlntClient, name: str, *, namespace: str | None = None
) -> AsyncIterator[dict[str, Any]]:
    """Each state of the Invocation as it changes, ending with the finished one.

    A watch of the one object (`fieldSelector=metadata.name=NAME`) from the state just
    read, so no change falls between the read and the watch; a watch the server ends is
    started again from the last state seen. `errors.NotFound` when it is (or gets)
    deleted before it finished.
    """
    current = await get(client, name, namespace=namespace)
    yield current
    path = client.collection_path(PLURAL, namespace=namespace)
    while not finished(current):
        params: dict[str, str | int | bool] = {
            "fieldSelector": f"metadata.name={name}",
            "resourceVersion": str(current["metadata"]["resourceVersion"]),
            "allowWatchBookmarks": True,
        }
        async for event in client.watch(path, params=params):
            if event.type == "DELETED":
                current = await get(client, name, namespace=namespace)  # raises NotFound
            elif event.type in ("ADDED", "MODIFIED"):
                current = event.object
                yield current
                if finished(current):
                    return
            elif event.type == "BOOKMARK":
                version = (event.object.get("metadata") or {}).get("resourceVersion")
                if version:
                    current.setdefault("metadata", {})["resourceVersion"] = version
            elif event.type == "ERROR":  # 410 Expired and the like: read, watch again
                current = await get(client, name, namespace=namespace)
                yield current
                break
