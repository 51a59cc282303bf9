"""Writing the catalog's objects into storage: only what changed, so that a watcher sees
an event (and a resourceVersion moves) exactly when a refresh found a difference.

The one writer of the Workflow keys. Each `sync` lists what is stored, then creates the
objects that are new (with a uid, a creationTimestamp and generation 1), rewrites those
whose spec or status differ (keeping uid and creationTimestamp; generation grows when the
spec changed) and deletes those no source holds any more. The time of the refresh is not
stored (`store.CatalogStore` adds it as it serves), so an unchanged refresh writes nothing.

Errors: `plnt.storage.errors` (a key written meanwhile by nobody else cannot happen, as
this is the only writer; a store that fails ends the sync, which the next refresh redoes).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from plnt.api.meta import now_rfc3339
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.objects import Object
from plnt.registry.storedobjects import decode, encode
from plnt.storage import errors as storage_errors
from plnt.storage.interface import KeyValue, Store


@dataclass(frozen=True, slots=True)
class Synced:
    """How many objects one sync created, changed and deleted."""

    created: int = 0
    changed: int = 0
    deleted: int = 0


def _content(obj: Object) -> tuple[object, object, object]:
    return obj.get("spec"), obj.get("status"), obj.get("metadata", {}).get("labels")


class CatalogWriter:
    """Makes the stored objects of `definition` equal the wanted ones (see the module)."""

    def __init__(self, definition: ResourceDefinition, storage: Store) -> None:
        self.definition = definition
        self.storage = storage

    async def sync(self, wanted: Mapping[tuple[str, str], Object]) -> Synced:
        d = self.definition
        stored = await self._stored()
        created = changed = deleted = 0
        for (namespace, name), obj in wanted.items():
            key = d.key(namespace, name)
            old = stored.pop(key, None)
            if old is None:
                await self.storage.create(key, encode(_new(obj)))
                created += 1
                continue
            current = decode(old)
            if _content(current) == _content(obj):
                continue
            await self.storage.guaranteed_update(key, functools.partial(_changed, obj=obj))
            changed += 1
        for key in stored:
            try:
                await self.storage.delete(key)
            except storage_errors.KeyNotFound:
                continue
            deleted += 1
        return Synced(created, changed, deleted)

    async def _stored(self) -> dict[str, KeyValue]:
        found: dict[str, KeyValue] = {}
        token: str | None = None
        while True:
            page = await self.storage.list(
                self.definition.key_prefix(), continue_token=token, revision=0
            )
            found.update((kv.key, kv) for kv in page.items)
            token = page.continue_token
            if token is None:
                return found


def _new(obj: Object) -> Object:
    meta = dict(obj["metadata"])
    meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(), generation=1)
    return {**obj, "metadata": meta}


def _changed(kv: KeyValue, *, obj: Object) -> bytes | None:
    old = decode(kv)
    if _content(old) == _content(obj):
        return None
    old_meta = old["metadata"]
    meta = dict(obj["metadata"])
    for kept in ("uid", "creationTimestamp"):
        if kept in old_meta:
            meta[kept] = old_meta[kept]
    generation = int(old_meta.get("generation") or 1)
    meta["generation"] = generation + (1 if old.get("spec") != obj.get("spec") else 0)
    return encode({**obj, "metadata": meta})
