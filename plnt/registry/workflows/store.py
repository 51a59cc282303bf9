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
from typing import Any

from plnt.api import errors
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.objects import Object
from plnt.registry.options import WriteResult
from plnt.registry.store import ResourceStore
from plnt.storage.interface import KeyValue, Store


class CatalogStore(ResourceStore):
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

    def _refuse(self, verb: str) -> errors.MethodNotSupported:
        return errors.MethodNotSupported.of(self.definition.group_resource, verb)

    async def create(self, *args: Any, **kwargs: Any) -> WriteResult:
        raise self._refuse("create")

    async def update(self, *args: Any, **kwargs: Any) -> WriteResult:
        raise self._refuse("update")

    async def apply(self, *args: Any, **kwargs: Any) -> WriteResult:
        raise self._refuse("patch")

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("delete")

    async def delete_collection(self, *args: Any, **kwargs: Any) -> Any:
        raise self._refuse("deletecollection")
