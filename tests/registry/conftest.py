"""Fixtures for registry tests that need storage: one real etcd per session, a keyspace per test,
or the in-memory store where etcd is not what a test is about."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from plnt.storage.etcd import EtcdStore
from plnt.storage.memory import MemoryStore
from tests.support.etcd import etcd_endpoint_fixture

etcd_endpoint = etcd_endpoint_fixture()


@pytest.fixture
async def etcd_store(etcd_endpoint: str) -> AsyncIterator[EtcdStore]:
    """An etcd store under a key prefix no other test uses."""
    async with EtcdStore(etcd_endpoint, key_prefix=f"/t-{uuid.uuid4().hex[:12]}") as store:
        yield store


@pytest.fixture
async def memory_store() -> AsyncIterator[MemoryStore]:
    """A fresh in-memory store: no etcd is started for the tests that use only this."""
    async with MemoryStore() as store:
        yield store
