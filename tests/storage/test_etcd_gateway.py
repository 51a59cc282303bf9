"""etcd's JSON gateway: revision reads and creates answer what gRPC answers, over TLS
too, and the ways back to gRPC (no gateway, a closed connection, every connection busy,
a create whose answer was lost)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from plnt.processes.ports import free_port
from plnt.storage import errors
from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore
from plnt.storage.etcd_gateway import CONNECTIONS, Gateway, GatewayFailed, GatewayMissing
from tests.support.etcd import running_tls_etcd

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def test_the_gateway_answers_the_revision_grpc_answers_and_sees_every_write(
    etcd_store: EtcdStore, prefix: str
) -> None:
    async with EtcdStore(etcd_store.endpoint, key_prefix="/registry", gateway=False) as grpc:
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
    (our client certificate was accepted), and gRPC must answer every call instead."""
    async with running_tls_etcd(tmp_path) as etcd:
        tls = etcd.tls
        async with EtcdStore(
            etcd.endpoint, ca_file=tls.ca, cert_file=tls.client_cert, key_file=tls.client_key
        ) as store:
            written = await store.create("/p/a", b"v")
            for _ in range(6):
                assert await store.current_revision() == written.mod_revision
            # The create's failure counts toward the rest as much as a read's: one failed
            # create (settled through gRPC) and two failed reads rest the gateway.
            assert store.creates == {"gateway": 0, "grpc": 1, "gateway_failed": 1}
            assert store.revision_reads == {"gateway": 0, "grpc": 6, "gateway_failed": 2}


async def test_reads_beyond_the_gateways_connections_go_to_grpc_instead_of_queueing(
    etcd_store: EtcdStore, prefix: str
) -> None:
    written = await etcd_store.create(f"{prefix}k", b"v")
    reads = CONNECTIONS + 2
    revisions = await asyncio.gather(*(etcd_store.current_revision() for _ in range(reads)))
    assert revisions == [written.mod_revision] * reads
    assert etcd_store.revision_reads["gateway"] == CONNECTIONS
    assert etcd_store.revision_reads["grpc"] == 2


@pytest.fixture
async def fake_gateway() -> AsyncIterator[Callable[[Handler], Awaitable[Gateway]]]:
    """An HTTP server standing in for etcd's gateway, answering as the test says."""
    runners: list[web.AppRunner] = []
    readers: list[Gateway] = []

    async def start(handler: Handler) -> Gateway:
        app = web.Application()
        app.router.add_post("/v3/kv/range", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        runners.append(runner)
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        reader = Gateway(host="127.0.0.1", port=port, ssl_context=None, timeout=5, connections=1)
        readers.append(reader)
        return reader

    yield start
    for reader in readers:
        await reader.close()
    for runner in runners:
        await runner.cleanup()


async def test_a_server_without_the_gateway_is_told_apart_from_a_failure(
    fake_gateway: Callable[[Handler], Awaitable[Gateway]],
) -> None:
    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="404 page not found")

    async def failing(request: web.Request) -> web.Response:
        return web.json_response({"error": "etcdserver: no leader", "code": 14}, status=503)

    with pytest.raises(GatewayMissing, match="404"):
        await (await fake_gateway(missing)).revision(b"/registry")
    with pytest.raises(GatewayFailed, match="503"):
        await (await fake_gateway(failing)).revision(b"/registry")


async def test_chunked_answers_and_closed_connections_are_read(
    fake_gateway: Callable[[Handler], Awaitable[Gateway]],
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
    assert [await reader.revision(b"/registry") for _ in range(3)] == [41, 42, 43]
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
    fake_gateway: Callable[[Handler], Awaitable[Gateway]],
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
    first = asyncio.create_task(reader.revision(b"/registry"))
    async with asyncio.timeout(5):
        await arrived.wait()
    assert reader.busy
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert not reader.busy
    assert await reader.revision(b"/registry") == 102
    assert peers[1] is not peers[0]  # the half-used connection was not reused
    release.set()


async def test_gateway_creates_answer_what_grpc_answers_and_refuse_an_existing_key(
    etcd_store: EtcdStore, prefix: str
) -> None:
    async with EtcdStore(etcd_store.endpoint, key_prefix="/registry", gateway=False) as grpc:
        first = await etcd_store.create(f"{prefix}a", b'{"n": 1}')
        assert await grpc.get(f"{prefix}a") == first
        assert first.mod_revision == first.create_revision == await grpc.current_revision()
        with pytest.raises(errors.KeyExists):
            await etcd_store.create(f"{prefix}a", b'{"n": 2}')
        assert (await grpc.get(f"{prefix}a")).value == b'{"n": 1}'
        second = await grpc.create(f"{prefix}b", b"")  # an empty value travels too
        assert await etcd_store.get(f"{prefix}b") == second
        empty = await etcd_store.create(f"{prefix}c", b"")
        assert await grpc.get(f"{prefix}c") == empty
    assert etcd_store.creates == {"gateway": 3, "grpc": 0, "gateway_failed": 0}


class CuttingProxy:
    """A TCP proxy in front of etcd that passes every byte (gRPC's too) both ways, except
    that a gateway create (`POST /v3/kv/txn`) gets its connection cut: after etcd has
    the request (`forward=True`, its answer is lost) or before (`forward=False`)."""

    def __init__(self, target_port: int, *, forward: bool) -> None:
        self.target_port = target_port
        self.forward = forward
        self.cut = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", self.target_port)
        back = asyncio.create_task(self._pipe(upstream_reader, writer))
        self._tasks.add(back)
        try:
            while chunk := await reader.read(65536):
                if chunk.startswith(b"POST /v3/kv/txn "):
                    self.cut += 1
                    if self.forward:
                        upstream.write(chunk)
                        await upstream.drain()
                        await upstream_reader.readuntil(b"\r\n\r\n")  # etcd has answered
                    break
                upstream.write(chunk)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            back.cancel()
            writer.close()
            upstream.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await reader.read(65536):
                writer.write(chunk)


@pytest.mark.parametrize("forward", [True, False], ids=["applied", "never-sent-on"])
async def test_a_create_whose_answer_is_lost_is_settled_once_never_twice(
    etcd_store: EtcdStore, prefix: str, forward: bool
) -> None:
    port = int(etcd_store.endpoint.rsplit(":", 1)[1])
    proxy = CuttingProxy(port, forward=forward)
    async with proxy as endpoint, EtcdStore(endpoint, key_prefix="/registry") as store:
        created = await store.create(f"{prefix}k", b'{"uid": "1"}')
        assert store.creates["gateway_failed"] == proxy.cut == 1
        # Applied: the read finds our value; never applied: gRPC creates it.
        assert store.creates["grpc"] == (0 if forward else 1)
        with pytest.raises(errors.KeyExists):  # someone else's value is not ours
            await store.create(f"{prefix}k", b'{"uid": "2"}')
    assert await etcd_store.get(f"{prefix}k") == created
    listed = await etcd_store.list(prefix)
    assert [item.key for item in listed.items] == [f"{prefix}k"]
