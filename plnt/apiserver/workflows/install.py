"""Workflow, as the composition root installs it: one `KindInstall`.

The catalog's Workflows are rebuilt from their sources, so they live in memory (a
`MemoryStore` of their own, not etcd): the kind's store is the read-only `CatalogStore`
over it, and its cleanup context runs the refresh loop that writes into it
(`refreshing.Catalog`). No request ever waits on a source.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from plnt.apiserver import keys, kinds
from plnt.apiserver.workflows import keys as workflow_keys
from plnt.apiserver.workflows import refreshing
from plnt.processes import tasks
from plnt.registry import workflows
from plnt.registry.store import ResourceStore
from plnt.registry.workflows import syncing
from plnt.registry.workflows.store import CatalogStore
from plnt.storage.memory import MemoryStore
from plnt.workflowspec import scanning
from plnt.workflowspec.sources import RegistrySettings, SourceSettings


def _store(storing: kinds.Storing) -> ResourceStore:
    """The catalog's store over its own memory, and the refresher that fills it."""
    app, d = storing.app, storing.definition
    settings = app[keys.SETTINGS].catalog
    policy = app[keys.SETTINGS].signatures
    held = MemoryStore()
    config = SourceSettings(registry=RegistrySettings.from_env())
    catalog = refreshing.Catalog(
        settings,
        scanner=scanning.Scanner(
            config,
            layout_root=settings.layout_root,
            trusted=tuple(policy.signers.values()) if policy is not None else (),
        ),
        writer=syncing.CatalogWriter(d, held),
    )
    app[workflow_keys.CATALOG] = catalog
    return CatalogStore(d, held, last_refresh=lambda: catalog.last_refresh)


async def _refresh_context(app: web.Application) -> AsyncIterator[None]:
    """Refresh the catalog while the server runs."""
    async with tasks.running(app[workflow_keys.CATALOG].run(), name="workflow catalog"):
        yield


INSTALL = kinds.KindInstall(
    definition=workflows.DEFINITION,
    in_etcd=False,
    store=_store,
    contexts=(_refresh_context,),
)
