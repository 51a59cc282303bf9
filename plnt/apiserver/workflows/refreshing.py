"""The workflow catalog's refresh: sources → scans → Workflows → storage, in the background.

Every `CatalogSettings.refresh_seconds` (and once at start) the catalog reads its sources
file again (a file that no longer parses keeps the sources it listed before, and says so
as a source error), scans every source at once (`plnt.workflowspec.scanning`, which reads a
spec only for a digest it has not seen), builds the objects (`registry.workflows.building`)
and writes what changed (`registry.workflows.syncing`). A source that fails keeps what it
listed last, so an unreachable registry does not empty the catalog; the failure is in the
status of every Workflow of the source's namespaces until a listing works again.

No request ever waits on a source: `kubectl get workflows` reads the catalog's storage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from aiohttp import web

from plnt.api.meta import now_rfc3339
from plnt.apiserver import keys
from plnt.apiserver.settings import CatalogSettings
from plnt.processes import tasks
from plnt.registry import workflows
from plnt.registry.workflows import building, sources, syncing
from plnt.registry.workflows.store import CatalogStore
from plnt.storage.interface import Store
from plnt.workflowspec import scanning
from plnt.workflowspec.sources import RegistrySettings, SourceSettings

log = logging.getLogger("plnt.apiserver.workflows")

SOURCES_FILE_REASON = "InvalidSourcesFile"


class Catalog:
    """Refreshes the catalog (see the module docstring); `last_refresh` is when the last
    refresh finished, as RFC 3339 (None before the first)."""

    def __init__(
        self,
        settings: CatalogSettings,
        *,
        scanner: scanning.Scanner,
        writer: syncing.CatalogWriter,
    ) -> None:
        self.settings = settings
        self.last_refresh: str | None = None
        self.refreshes = 0
        self._scanner = scanner
        self._writer = writer
        self._states: dict[str, building.SourceState] = {}
        self._sources: tuple[sources.CatalogSource, ...] = tuple(
            sources.CatalogSource(s) for s in settings.default_sources
        )
        self._file_error: scanning.Problem | None = None

    async def refresh(self) -> syncing.Synced:
        """Read every source once and write what changed."""
        await self._read_sources_file()
        listed = await asyncio.gather(*(self._scanner.scan(s.source) for s in self._sources))
        states: dict[str, building.SourceState] = {}
        for configured, scan in zip(self._sources, listed, strict=True):
            before = self._states.get(configured.source)
            if scan.error is not None and (before is None or before.error != scan.error):
                log.warning("catalog source %s: %s", configured.source, scan.error.message)
            found = scan.found if scan.error is None else (before.found if before else ())
            states[configured.source] = building.SourceState(
                configured.source, configured.namespaces, found, scan.error
            )
        self._states = states
        everything = list(states.values())
        if self._file_error is not None and self.settings.sources_file is not None:
            served = sorted({n for s in self._sources for n in s.namespaces})
            everything.append(
                building.SourceState(
                    str(self.settings.sources_file), tuple(served), (), self._file_error
                )
            )
        synced = await self._writer.sync(building.build(everything))
        self.last_refresh = now_rfc3339()
        self.refreshes += 1
        return synced

    async def _read_sources_file(self) -> None:
        path = self.settings.sources_file
        if path is None:
            return
        try:
            self._sources = await asyncio.to_thread(sources.load, path)
            self._file_error = None
        except sources.SourcesError as error:
            if self._file_error is None:
                log.warning("catalog sources file: %s (keeping the sources it listed)", error)
            self._file_error = scanning.Problem(SOURCES_FILE_REASON, str(error))

    async def run(self) -> None:
        """Refresh now, then every `refresh_seconds`, until cancelled."""
        while True:
            try:
                await self.refresh()
            except Exception:  # a refresh must never end the loop; the next one retries
                log.exception("the workflow catalog's refresh failed")
            await asyncio.sleep(self.settings.refresh_seconds)


def context(
    storage: Callable[[], Store],
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The cleanup context that serves the catalog from `storage()` and refreshes it.

    Runs after the storage context (it adds the Workflow store to `keys.STORES`)."""

    async def serve_catalog(app: web.Application) -> AsyncIterator[None]:
        settings = app[keys.SETTINGS].catalog
        policy = app[keys.SETTINGS].signatures
        held = storage()
        d = workflows.DEFINITION
        config = SourceSettings(registry=RegistrySettings.from_env())
        catalog = Catalog(
            settings,
            scanner=scanning.Scanner(
                config,
                layout_root=settings.layout_root,
                trusted=tuple(policy.signers.values()) if policy is not None else (),
            ),
            writer=syncing.CatalogWriter(d, held),
        )
        app[keys.STORES][(d.group, d.plural)] = CatalogStore(
            d, held, last_refresh=lambda: catalog.last_refresh
        )
        async with tasks.running(catalog.run(), name="workflow catalog"):
            yield

    return serve_catalog
