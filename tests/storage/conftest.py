"""Fixtures for the storage tests: one real etcd per session, a fresh key prefix per test.

The in-memory store needs no etcd: its parametrization of `store` starts none.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest

from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from plnt.storage.memory import MemoryStore
from tests.support.etcd import etcd_endpoint_fixture
from tests.support.stores import AnyStore

etcd_endpoint = etcd_endpoint_fixture()


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses, so tests can share one etcd."""
    return f"/plnt.work/tests-{uuid.uuid4().hex[:12]}/"


@pytest.fixture
async def etcd_store(etcd_endpoint: str) -> AsyncIterator[EtcdStore]:
    async with EtcdStore(etcd_endpoint, key_prefix="/registry") as store:
        yield store


@contextlib.asynccontextmanager
async def opened(kind: str, request: pytest.FixtureRequest, prefix: str) -> AsyncIterator[AnyStore]:
    """The store `kind` names: `etcd`, `cache` (the watch cache over etcd) or `memory`."""
    if kind == "memory":
        async with MemoryStore() as memory:
            yield memory
        return
    endpoint: str = request.getfixturevalue("etcd_endpoint")  # started only when needed
    async with EtcdStore(endpoint, key_prefix="/registry") as etcd_store:
        if kind == "etcd":
            yield etcd_store
            return
        async with CachedStore(etcd_store, prefixes=[prefix], future_wait=2.0) as cached:
            yield cached


@pytest.fixture(params=["etcd", "cache", "memory"])
async def store(request: pytest.FixtureRequest, prefix: str) -> AsyncIterator[AnyStore]:
    """Every `Store` implementation: the etcd store, the watch cache over it, and memory."""
    async with opened(request.param, request, prefix) as opened_store:
        yield opened_store


@pytest.fixture(params=["etcd", "cache"])
async def etcd_backed_store(request: pytest.FixtureRequest, prefix: str) -> AsyncIterator[AnyStore]:
    """The stores other etcd clients can write beside: etcd itself and the cache over it."""
    async with opened(request.param, request, prefix) as opened_store:
        yield opened_store
