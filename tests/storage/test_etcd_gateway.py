"""etcd's current revision through its JSON gateway: the same answer as gRPC, over TLS
too, and the ways back to gRPC (no gateway, a closed connection, a read in flight)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from plnt.processes.ports import free_port
from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from plnt.storage.etcd_gateway import GatewayFailed, GatewayMissing, GatewayRevisions
from tests.support.etcd import running_tls_etcd

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def test_the_gateway_answers_the_revision_grpc_answers_and_sees_every_write(
    etcd_store: EtcdStore, prefix: str
) -> None:
    async with EtcdStore(etcd_store.endpoint, key_prefix="/registry", gateway_reads=False) as grpc:
        for index in range(3):
            written = await etcd_store.create(f"{prefix}k{index}", b"v")
            assert await etcd_store.current_revision() == written.mod_revision
            assert await grpc.current_revision() == written.mod_revision
    assert etcd_store.revision_reads == {"gateway": 3, "grpc": 0, "gateway_failed": 0}
    assert grpc.revision_reads == {"gateway": 0, "grpc": 3, "gateway_failed": 0}


async def test_over_tls_a_gateway_that_keeps_failing_rests_and_grpc_answers(
    tmp_path: Path,
) -> None:
    """The test etcd's serving certificate is for servers only, so its gateway cannot dial
    etcd's own client-certificate port: every gateway read fails after the TLS handshake
    (our client certificate was accepted), and gRPC must answer every read instead."""
    async with running_tls_etcd(tmp_path) as etcd:
        tls = etcd.tls
        async with EtcdStore(
            etcd.endpoint, ca_file=tls.ca, cert_file=tls.client_cert, key_file=tls.client_key
        ) as store:
            written = await store.create("/p/a", b"v")
            for _ in range(6):
                assert await store.current_revision() == written.mod_revision
            assert store.revision_reads == {"gateway": 0, "grpc": 6, "gateway_failed": 3}


async def test_a_read_while_one_is_in_flight_goes_to_grpc_instead_of_queueing(
    etcd_store: EtcdStore, prefix: str
) -> None:
    written = await etcd_store.create(f"{prefix}k", b"v")
    revisions = await asyncio.gather(*(etcd_store.current_revision() for _ in range(4)))
    assert revisions == [written.mod_revision] * 4
    assert etcd_store.revision_reads["gateway"] >= 1
    assert etcd_store.revision_reads["grpc"] >= 1


@pytest.fixture
async def fake_gateway() -> AsyncIterator[Callable[[Handler], Awaitable[GatewayRevisions]]]:
    """An HTTP server standing in for etcd's gateway, answering as the test says."""
    runners: list[web.AppRunner] = []
    readers: list[GatewayRevisions] = []

    async def start(handler: Handler) -> GatewayRevisions:
        app = web.Application()
        app.router.add_post("/v3/kv/range", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        reader = GatewayRevisions(
            host="127.0.0.1", port=port, key=b"/registry", ssl_context=None, timeout=5
        )
        readers.append(reader)
        return reader

    yield start
    for reader in readers:
        await reader.close()
    for runner in runners:
        await runner.cleanup()


async def test_a_server_without_the_gateway_is_told_apart_from_a_failure(
    fake_gateway: Callable[[Handler], Awaitable[GatewayRevisions]],
) -> None:
    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="404 page not found")

    async def failing(request: web.Request) -> web.Response:
        return web.json_response({"error": "etcdserver: no leader", "code": 14}, status=503)

    with pytest.raises(GatewayMissing, match="404"):
        await (await fake_gateway(missing)).read()
    with pytest.raises(GatewayFailed, match="503"):
        await (await fake_gateway(failing)).read()


async def test_chunked_answers_and_closed_connections_are_read(
    fake_gateway: Callable[[Handler], Awaitable[GatewayRevisions]],
) -> None:
    seen: list[bytes] = []

    async def chunked_then_close(request: web.Request) -> web.StreamResponse:
        seen.append(await request.read())
        response = web.StreamResponse(headers={"Connection": "close"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b'{"header":{"revision":')
        await response.write(f'"{len(seen) + 40}"}}}}'.encode())
        await response.write_eof()
        return response

    reader = await fake_gateway(chunked_then_close)
    assert [await reader.read() for _ in range(3)] == [41, 42, 43]
    assert seen[0] == b'{"key":"L3JlZ2lzdHJ5","count_only":true}'


async def test_consistent_reads_share_revision_reads_and_a_lone_read_sends_one(
    etcd_store: EtcdStore, prefix: str
) -> None:
    """Twenty concurrent consistent GETs: the first sends its own revision read, the other
    nineteen join the one read sent after it; then a lone GET sends exactly one."""
    async with CachedStore(etcd_store, prefixes=[prefix]) as cached:
        written = await cached.create(f"{prefix}k", b"v")
        before = sum(etcd_store.revision_reads.values())
        got = await asyncio.gather(*(cached.get(f"{prefix}k") for _ in range(20)))
        assert got == [written] * 20
        assert sum(etcd_store.revision_reads.values()) - before == 2
        assert await cached.get(f"{prefix}k") == written
        assert sum(etcd_store.revision_reads.values()) - before == 3


async def test_a_read_cancelled_mid_answer_leaves_the_next_read_a_fresh_connection(
    fake_gateway: Callable[[Handler], Awaitable[GatewayRevisions]],
) -> None:
    release, arrived = asyncio.Event(), asyncio.Event()
    peers: list[object] = []

    async def slow_first(request: web.Request) -> web.Response:
        peers.append(request.transport)
        arrived.set()
        if len(peers) == 1:
            await release.wait()  # never answered before the client gives up
        return web.json_response({"header": {"revision": str(100 + len(peers))}})

    reader = await fake_gateway(slow_first)
    first = asyncio.create_task(reader.read())
    async with asyncio.timeout(5):
        await arrived.wait()
    assert reader.busy
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert not reader.busy
    assert await reader.read() == 102
    assert peers[1] is not peers[0]  # the half-used connection was not reused
    release.set()
