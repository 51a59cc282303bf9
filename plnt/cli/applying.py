"""Applying one WorkflowRun and following its deploy: what `plnt run` does between parse and print.

Applying (field manager `plnt`, conflicts forced) makes `plnt run` idempotent and lets
it share objects with `kubectl apply --server-side`; comparing resourceVersions before
and after tells `created`, `configured` and `unchanged` apart as kubectl does. Following
watches the one run (`fieldSelector=metadata.name=NAME`, resuming from the last
resourceVersion seen, re-reading the object when the watch expires) until
`progress.outcome` says the deploy of the applied generation is over.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal

from plnt.cli import progress
from plnt.client import PlntClient, errors

WATCH_SECONDS = 300


@dataclass(frozen=True, slots=True)
class Applied:
    """The run as the server stored it, and what applying did to it."""

    run: dict[str, Any]
    verb: Literal["created", "configured", "unchanged"]


async def apply(client: PlntClient, document: dict[str, Any]) -> Applied:
    """Server-side apply `document`; raises `errors.Invalid` when it has no name."""
    name = str((document.get("metadata") or {}).get("name") or "")
    if not name:
        raise errors.Invalid("WorkflowRun: metadata.name is required", code=422, reason="Invalid")
    ns = (document.get("metadata") or {}).get("namespace") or None
    try:
        before: dict[str, Any] | None = await client.get_workflowrun(name, namespace=ns)
    except errors.NotFound:
        before = None
    applied = await client.apply_workflowrun(document, namespace=ns)
    if before is None:
        return Applied(applied, "created")
    unchanged = before["metadata"].get("resourceVersion") == applied["metadata"].get(
        "resourceVersion"
    )
    return Applied(applied, "unchanged" if unchanged else "configured")


async def follow(
    client: PlntClient, applied: dict[str, Any], display: progress.Display, *, within: float
) -> progress.Outcome:
    """The outcome of deploying the applied generation, or a failure after `within` seconds."""
    generation = int(applied["metadata"].get("generation") or 1)
    try:
        async with asyncio.timeout(within):
            return await _until_outcome(client, applied, display, generation=generation)
    except TimeoutError:
        return progress.Outcome(
            False, f"timed out after {within:g}s waiting for generation {generation}"
        )


async def _until_outcome(
    client: PlntClient,
    current: dict[str, Any],
    display: progress.Display,
    *,
    generation: int,
) -> progress.Outcome:
    meta = current["metadata"]
    name, ns = meta["name"], meta.get("namespace")
    while True:
        display.update(current)
        done = progress.outcome(current, generation)
        if done is not None:
            return done
        version = current["metadata"].get("resourceVersion")
        try:
            async for event in client.watch_workflowrun(
                name, namespace=ns, resource_version=version, timeout_seconds=WATCH_SECONDS
            ):
                if event.type == "BOOKMARK":
                    current["metadata"]["resourceVersion"] = event.object["metadata"].get(
                        "resourceVersion", version
                    )
                    continue
                if event.type == "DELETED":
                    return progress.Outcome(False, "the WorkflowRun was deleted")
                current = event.object
                display.update(current)
                done = progress.outcome(current, generation)
                if done is not None:
                    return done
        except errors.Gone:
            current = await client.get_workflowrun(name, namespace=ns)
