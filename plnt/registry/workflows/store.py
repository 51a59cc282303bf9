"""The Workflow store: the catalog served read-only from its own storage.

Reads are a `ResourceStore`'s (get, list, watch, Tables, selectors), over the storage the
catalog's writer keeps (`syncing`). Every write through the API is refused with kube's 405
MethodNotAllowed, as for a verb the kind does not declare (the generic dispatcher refuses
them first; this is the same answer for any other caller).

As it serves an object, the store sets `status.lastRefreshTime` to the catalog's last
finished refresh: that time changes every refresh, and storing it would move every
resourceVersion (and wake every watcher) although nothing else changed.
"""

from __future__ import annotations

from collections.abc import Callable

from plnt.registry.definitions import ResourceDefinition
from plnt.registry.objects import Object
from plnt.registry.readonly import ReadOnlyStore
from plnt.storage.interface import KeyValue, Store


class CatalogStore(ReadOnlyStore):
    """Reads of the catalog's Workflows; writes are 405 (see the module docstring)."""

    def __init__(
        self,
        definition: ResourceDefinition,
        storage: Store,
        *,
        last_refresh: Callable[[], str | None],
    ) -> None:
        super().__init__(definition, storage)
        self._last_refresh = last_refresh

    def read(self, kv: KeyValue) -> Object:
        obj = super().read(kv)
        moment = self._last_refresh()
        if moment is None:
            return obj
        status = dict(obj.get("status") or {})
        status["lastRefreshTime"] = moment
        return {**obj, "status": status}
