"""Probing PlntBackends at resolve time, and writing what was found to their status.

Placement must not choose a backend that does not answer; probing when a deploy
resolves its backend means it never trusts a stale status. Each backend with an
endpoint is asked whether it is up (and a `vllm` server for its load); the result is
written to the backend's status through the API (best effort: a failed write is
logged, the probe still counts) and returned merged into the object placement reads.
Activity-side code: I/O through aiohttp and `plnt.client`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp

from plnt.api.meta import now_rfc3339
from plnt.client import errors as client_errors
from plnt.client import transport
from plnt.client.clients import PlntClient
from plnt.sagas import probing

log = logging.getLogger("plnt.sagas")


async def probe_all(
    http: aiohttp.ClientSession, api: PlntClient, backends: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`backends` with `status.reachable` (and a vllm server's load) from a probe made now."""
    return list(await asyncio.gather(*(_probe(http, api, backend) for backend in backends)))


async def _probe(
    http: aiohttp.ClientSession, api: PlntClient, backend: dict[str, Any]
) -> dict[str, Any]:
    spec = backend.get("spec") or {}
    if spec.get("type") == "echo" or not spec.get("endpoint"):
        return backend
    endpoint = str(spec["endpoint"])
    ok, detail = await probing.reachable(http, endpoint)
    status: dict[str, Any] = {"reachable": ok, "lastProbeTime": now_rfc3339()}
    if spec.get("type") == "vllm":
        # Load unknown is written as unknown (null), never left stale.
        load = (await probing.backend_load(http, endpoint))[0] if ok else None
        status["inFlight"] = None if load is None else load.in_flight
        status["queueDepth"] = None if load is None else load.queue_depth
    await _record(api, backend["metadata"], status)
    if not ok:
        log.info("backend %s unreachable: %s", backend["metadata"]["name"], detail)
    merged = {**(backend.get("status") or {}), **status, "probe": detail}
    return {**backend, "status": {key: value for key, value in merged.items() if value is not None}}


async def _record(api: PlntClient, meta: dict[str, Any], status: dict[str, Any]) -> None:
    path = api.object_path(
        "plntbackends", meta["name"], namespace=meta["namespace"], subresource="status"
    )
    try:
        await api.request(
            "PATCH", path, json={"status": status}, content_type=transport.MERGE_PATCH
        )
    except client_errors.ClientError as error:
        log.warning("could not record the probe of %s: %s", meta["name"], error)
