"""Prometheus metrics of the API server, in a registry of its own (no process globals).

Also `InstrumentedStore`: wraps the etcd store beneath the watch cache so the
etcd latency histogram measures etcd, not memory reads.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from plnt.storage.interface import KeyValue, ListResult, Mutate, Store, WatchEvent

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The server's metric families."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "plnt_apiserver_requests",
            "Requests by verb, resource and HTTP code.",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "plnt_apiserver_request_duration_seconds",
            "Request latency by verb and resource (watches excluded).",
            ["verb", "resource"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.open_watches = Gauge(
            "plnt_apiserver_open_watches",
            "Watches currently streaming.",
            ["resource"],
            registry=self.registry,
        )
        self.etcd_latency = Histogram(
            "plnt_etcd_request_duration_seconds",
            "etcd request latency by operation.",
            ["operation"],
            buckets=_BUCKETS,
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class InstrumentedStore:
    """A Store that times every etcd call (watch streams excepted: they are long-lived)."""

    def __init__(self, inner: Store, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def _timed(self, operation: str, call: Any) -> Any:
        start = time.perf_counter()
        try:
            return await call
        finally:
            self._metrics.etcd_latency.labels(operation).observe(time.perf_counter() - start)

    async def create(self, key: str, value: bytes) -> KeyValue:
        result: KeyValue = await self._timed("create", self._inner.create(key, value))
        return result

    async def get(self, key: str) -> KeyValue:
        result: KeyValue = await self._timed("get", self._inner.get(key))
        return result

    async def list(
        self, prefix: str, *, limit: int = 0, continue_token: str | None = None, revision: int = 0
    ) -> ListResult:
        result: ListResult = await self._timed(
            "list",
            self._inner.list(prefix, limit=limit, continue_token=continue_token, revision=revision),
        )
        return result

    async def guaranteed_update(
        self, key: str, mutate: Mutate, *, expected_revision: int = 0
    ) -> KeyValue:
        result: KeyValue = await self._timed(
            "update",
            self._inner.guaranteed_update(key, mutate, expected_revision=expected_revision),
        )
        return result

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        result: KeyValue = await self._timed(
            "delete", self._inner.delete(key, expected_revision=expected_revision)
        )
        return result

    def watch(
        self, prefix: str, *, after_revision: int, progress_interval: float | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[WatchEvent]]:
        return self._inner.watch(
            prefix, after_revision=after_revision, progress_interval=progress_interval
        )

    async def current_revision(self) -> int:
        result: int = await self._timed("current_revision", self._inner.current_revision())
        return result
