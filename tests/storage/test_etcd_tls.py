"""The etcd store over TLS: a CA to verify etcd, a client certificate etcd requires."""

from __future__ import annotations

from pathlib import Path

import pytest

from plnt.storage import errors
from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from tests.support.etcd import running_tls_etcd
from tests.support.stores import next_changes


async def test_the_store_and_its_cache_work_against_an_etcd_that_requires_client_certificates(
    tmp_path: Path,
) -> None:
    async with running_tls_etcd(tmp_path) as etcd:
        tls = etcd.tls
        assert etcd.endpoint.startswith("https://")
        async with (
            EtcdStore(
                etcd.endpoint,
                key_prefix="/registry",
                ca_file=tls.ca,
                cert_file=tls.client_cert,
                key_file=tls.client_key,
            ) as store,
            CachedStore(store, prefixes=["/p/"]) as cached,
        ):
            first = await cached.create("/p/a", b"v")
            assert await cached.get("/p/a") == first
            async with cached.watch("/p/", after_revision=first.mod_revision) as events:
                second = await cached.create("/p/b", b"v")
                assert [e.kv for e in await next_changes(events, 1)] == [second]
            assert (await store.list("/p/")).items == [first, second]


async def test_an_etcd_that_requires_client_certificates_refuses_a_store_without_one(
    tmp_path: Path,
) -> None:
    async with (
        running_tls_etcd(tmp_path) as etcd,
        EtcdStore(etcd.endpoint, ca_file=etcd.tls.ca, request_timeout=5) as store,
    ):
        with pytest.raises(errors.Unavailable):
            await store.get("/p/a")


def test_a_client_certificate_without_its_key_is_refused() -> None:
    with pytest.raises(ValueError, match="cert_file and key_file"):
        EtcdStore("https://127.0.0.1:2379", cert_file="client.crt")
