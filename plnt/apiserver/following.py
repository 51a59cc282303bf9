"""Gauges kept from stored objects: the server follows a kind on its own store.

Some metrics describe what is stored now (Invocations by phase, every run's last bench).
The API server already holds every object in its watch cache, so it follows the kind with
a watch on its own store (a memory subscription when the cache is on): list, then watch
from the listed revision; when the watch ends or is lost, list again. A `Gauges`
collector keeps what it needs of each object and turns it into metrics when /metrics is
scraped, so every replica exports the same values (dashboards aggregate them with `max`).

Errors: none raised. A lost or expired watch is logged and followed by a new list; any
other failure is logged with its traceback and followed the same way, so the gauges
outlive surprises.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiohttp import web
from prometheus_client.registry import Collector

from plnt.apiserver import keys
from plnt.processes import tasks
from plnt.storage import errors as storage_errors
from plnt.storage.interface import KeyValue, Store

log = logging.getLogger("plnt.apiserver")

RETRY_SECONDS = 1.0


class Gauges(Collector, abc.ABC):
    """A collector whose values come from the objects `follow` hands it."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Forget every object: a fresh list follows."""

    @abc.abstractmethod
    def update(self, obj: Mapping[str, Any]) -> None:
        """Take an object's current state."""

    @abc.abstractmethod
    def forget(self, obj: Mapping[str, Any]) -> None:
        """Drop a deleted object (`obj` is its last state)."""


def _decode(kv: KeyValue | None) -> Mapping[str, Any] | None:
    if kv is None:
        return None
    try:
        obj = json.loads(kv.value)
    except ValueError:
        return None
    return obj if isinstance(obj, Mapping) else None


async def follow(store: Store, prefix: str, gauges: Gauges, *, name: str) -> None:
    """Keep `gauges` equal to the objects under `prefix`: list, then watch; list again on a
    lost or expired watch (the cache resumes etcd, so this is rare)."""
    while True:
        try:
            listed = await store.list(prefix, consistent=False)
            gauges.clear()
            for kv in listed.items:
                if (obj := _decode(kv)) is not None:
                    gauges.update(obj)
            async with store.watch(prefix, after_revision=listed.revision) as events:
                async for event in events:
                    if (obj := _decode(event.kv)) is None:
                        continue  # progress: nothing changed
                    if event.type == "DELETED":
                        gauges.forget(obj)
                    else:
                        gauges.update(obj)
        except storage_errors.StorageError as error:
            log.info("%s: watch ended (%s); listing again", name, error)
        except Exception:  # the gauges must outlive any surprise; say it and start over
            log.exception("%s: following %s failed; listing again", name, prefix)
        await asyncio.sleep(RETRY_SECONDS)  # after an end or a loss, not in a tight loop


@contextlib.asynccontextmanager
async def exported(
    app: web.Application, gauges: Gauges, *, prefix: str, name: str
) -> AsyncIterator[None]:
    """`gauges` in the server's metrics and kept by `follow` while the block runs."""
    app[keys.METRICS].registry.register(gauges)
    try:
        async with tasks.running(follow(app[keys.STORAGE], prefix, gauges, name=name), name=name):
            yield
    finally:
        app[keys.METRICS].registry.unregister(gauges)
