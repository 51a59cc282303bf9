"""Probing a PlntBackend as soon as it is created or its spec changes.

The periodic prober (`backend_probes.Prober`) keeps every status current, but only once
an interval: between a backend's creation and the next round its status is empty
(`REACHABLE <none>`, no Event), and an endpoint that was just changed is judged by the
old one's figures. So each worker that probes periodically also watches PlntBackends in
every namespace and probes one at once when a watch event shows a `metadata.generation`
it has not probed: a creation, or a write that changed the spec. The prober's own status
writes keep the generation, so they trigger nothing.

The watch starts from a list's resourceVersion; when it ends (the server's timeout, a
410 Expired, the API down) the list is read again and any backend whose generation moved
meanwhile is probed then, so a missed event delays a probe, never loses one. Probes of
different backends run side by side in the watcher's task group and end with it.

Activity-side code (`plnt.client`, aiohttp). Errors are logged and the watch begins again
after `RETRY_SECONDS`; nothing here raises to the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp

from plnt.api.names import BACKENDS
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.client.events import EventPoster
from plnt.sagas.probing import backend_probes

log = logging.getLogger("plnt.sagas")

RETRY_SECONDS = 1.0
"""Pause before listing again after a watch failed (the API down, say)."""

WATCH_TIMEOUT_SECONDS = 300
"""Asked of the server: a watch ends this often and begins again from a fresh list."""


def _key(backend: Mapping[str, Any]) -> str:
    return str((backend.get("metadata") or {}).get("uid") or "")


def _generation(backend: Mapping[str, Any]) -> int:
    value = (backend.get("metadata") or {}).get("generation")
    return int(value) if isinstance(value, int) else 0


class SpecWatcher:
    """Probes each PlntBackend whose generation it has not probed yet (module docstring)."""

    def __init__(
        self,
        api: PlntClient,
        http: aiohttp.ClientSession,
        *,
        budget: float,
        events: EventPoster | None = None,
    ) -> None:
        self.api = api
        self.http = http
        self.budget = budget
        self.events = events
        self.probed: dict[str, int] = {}
        """uid → the generation last probed (or seen, for those the first list found)."""
        self._first_list = True

    async def run(self) -> None:
        """List, then watch, again and again, until cancelled."""
        async with asyncio.TaskGroup() as probes:
            while True:
                try:
                    await self._list_and_watch(probes)
                except (client_errors.ClientError, aiohttp.ClientError, TimeoutError) as error:
                    log.info("watching PlntBackends: %s", error)
                except Exception:  # a bug must not end the watch for the worker's lifetime
                    log.exception("watching PlntBackends failed")
                await asyncio.sleep(RETRY_SECONDS)  # a backoff, not a synchronisation

    async def _list_and_watch(self, probes: asyncio.TaskGroup) -> None:
        path = self.api.collection_path(BACKENDS, all_namespaces=True)
        listed: dict[str, Any] = (await self.api.request("GET", path)).json()
        items = listed.get("items") or []
        if self._first_list:
            # What exists when the worker starts is the periodic round's to probe.
            self.probed.update({_key(b): _generation(b) for b in items})
            self._first_list = False
        alive = {_key(b) for b in items}
        for gone in set(self.probed) - alive:
            del self.probed[gone]
        for backend in items:
            self._consider(backend, probes)
        params: dict[str, str | int | bool] = {
            "resourceVersion": str((listed.get("metadata") or {}).get("resourceVersion") or ""),
            "allowWatchBookmarks": True,
            "timeoutSeconds": WATCH_TIMEOUT_SECONDS,
        }
        async for event in self.api.watch(path, params=params):
            if event.type == "ERROR":
                return  # 410 Expired and the like: list again
            if event.type == "DELETED":
                self.probed.pop(_key(event.object), None)
            elif event.type in ("ADDED", "MODIFIED"):
                self._consider(event.object, probes)

    def _consider(self, backend: dict[str, Any], probes: asyncio.TaskGroup) -> None:
        key, generation = _key(backend), _generation(backend)
        if not key or self.probed.get(key) == generation:
            return
        self.probed[key] = generation
        probes.create_task(self._probe(backend), name=f"plnt-backend-probe-{key}")

    async def _probe(self, backend: dict[str, Any]) -> None:
        meta = backend.get("metadata") or {}
        try:
            async with asyncio.timeout(self.budget):
                await backend_probes.probe_and_record(
                    self.http, self.api, backend, events=self.events
                )
        except Exception as error:  # one backend's probe never ends the watch
            with contextlib.suppress(Exception):
                log.warning(
                    "probing PlntBackend %s/%s on change: %s",
                    meta.get("namespace"),
                    meta.get("name"),
                    error,
                )
