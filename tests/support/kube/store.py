"""The stand-in's storage: objects in memory under one increasing resourceVersion, with watches.

Like etcd behind kube-apiserver, every write gets the next revision of one counter shared
by all kinds, so resourceVersions increase across kinds. Objects are kept by
(storage resource, namespace, name) in one stored form; several API views may read the
same stored objects (core/v1 and events.k8s.io/v1 Events). A watch is an asyncio queue
fed under the store's lock; the whole history of changes is kept, so a watch from any
past resourceVersion replays exactly the changes after it (a real cluster compacts and
answers 410 Expired instead; the stand-in never does).

Everything here runs on the stand-in's event loop; other threads go through
`KubeStandIn`, which schedules onto it.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str, str]  # storage resource, namespace, name


@dataclass(frozen=True, slots=True)
class Change:
    """One committed write: ADDED, MODIFIED or DELETED, with the stored object after it."""

    type: str
    resource: str
    object: Obj
    revision: int


@dataclass
class Watcher:
    resource: str
    queue: asyncio.Queue[Change] = field(default_factory=asyncio.Queue)


class Store:
    """Stored objects, the revision counter, the change history and open watches."""

    def __init__(self) -> None:
        self.revision = 1
        self._objects: dict[Key, Obj] = {}
        self._history: list[Change] = []
        self._watchers: list[Watcher] = []
        self.on_change: list[Callable[[Change], None]] = []

    # --- reads ------------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        found = self._objects.get((resource, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, resource: str, namespace: str = "") -> list[Obj]:
        """Objects of `resource` (in `namespace`, or all namespaces when empty), by key."""
        return [
            copy.deepcopy(obj)
            for (res, ns, _), obj in sorted(self._objects.items())
            if res == resource and (not namespace or ns == namespace)
        ]

    # --- writes -----------------------------------------------------------------------

    def create(self, resource: str, obj: Obj) -> Obj:
        """Store a new object: uid, creationTimestamp and resourceVersion are set here."""
        meta = obj.setdefault("metadata", {})
        key = (resource, meta.get("namespace", ""), meta["name"])
        if key in self._objects:
            raise KeyError(key)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        return self._commit("ADDED", resource, key, obj)

    def update(self, resource: str, obj: Obj) -> Obj:
        meta = obj["metadata"]
        key = (resource, meta.get("namespace", ""), meta["name"])
        if key not in self._objects:
            raise KeyError(key)
        return self._commit("MODIFIED", resource, key, obj)

    def delete(self, resource: str, namespace: str, name: str) -> Obj:
        key = (resource, namespace, name)
        obj = self._objects[key]
        self.revision += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self.revision)
        del self._objects[key]
        self._publish(Change("DELETED", resource, gone, self.revision))
        return copy.deepcopy(gone)

    def _commit(self, kind: str, resource: str, key: Key, obj: Obj) -> Obj:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self._objects[key] = copy.deepcopy(obj)
        self._publish(Change(kind, resource, copy.deepcopy(obj), self.revision))
        return copy.deepcopy(obj)

    def _publish(self, change: Change) -> None:
        self._history.append(change)
        for watcher in self._watchers:
            if watcher.resource == change.resource:
                watcher.queue.put_nowait(change)
        for callback in self.on_change:
            callback(change)

    # --- watch ------------------------------------------------------------------------

    def changes_since(self, resource: str, revision: int) -> list[Change]:
        return [c for c in self._history if c.resource == resource and c.revision > revision]

    def open_watch(self, resource: str) -> Watcher:
        watcher = Watcher(resource)
        self._watchers.append(watcher)
        return watcher

    def close_watch(self, watcher: Watcher) -> None:
        if watcher in self._watchers:
            self._watchers.remove(watcher)


def now_rfc3339(micro: bool = False) -> str:
    """metav1.Time (seconds) or metav1.MicroTime (microseconds), UTC with a Z."""
    now = datetime.datetime.now(datetime.UTC)
    if micro:
        return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")
