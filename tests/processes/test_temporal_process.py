"""The Temporal dev server child: ready for clients on free ports, and gone once stopped."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest
from temporalio.client import Client

from plnt.processes import ports
from plnt.processes.temporal import TemporalDevServer, TemporalProcessError


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as sock:
        return sock.connect_ex((host, int(port))) == 0


async def test_temporal_answers_a_client_once_started_and_stops_listening_when_stopped(
    tmp_path: Path,
) -> None:
    server = TemporalDevServer(tmp_path / "t.db", ui_port=None, namespace="bench")
    try:
        await server.astart()
        client = await Client.connect(server.address, namespace="bench")
        assert client.namespace == "bench"
        assert server.ui_address is None
        # Configured for throughput: a write-ahead log (a setting the file itself keeps).
        with sqlite3.connect(f"file:{tmp_path / 't.db'}?mode=ro", uri=True) as db:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        await server.astop()
    assert not _listening(server.address)
    await server.astop()  # idempotent


async def test_start_fails_with_the_log_when_the_given_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = TemporalDevServer(tmp_path / "t.db", port=port, ui_port=None, start_timeout=20)
        with pytest.raises(TemporalProcessError, match="address already in use"):
            await server.astart()
    assert not _listening(server.address)


async def test_start_picks_fresh_ports_when_one_it_picked_is_taken_before_the_bind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process may take a port between `free_port` and the server's bind; a port
    plnt picked itself is picked again rather than failing the start."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        taken_port = taken.getsockname()[1]
        real_free_port = ports.free_port
        picks: list[int] = []

        def first_pick_taken() -> int:
            # The second pick of the first attempt is the HTTP API's port.
            picks.append(taken_port if len(picks) == 1 else real_free_port())
            return picks[-1]

        monkeypatch.setattr(ports, "free_port", first_pick_taken)
        server = TemporalDevServer(tmp_path / "t.db", ui_port=None, start_timeout=20)
        try:
            await server.astart()
            assert picks[1] == taken_port  # the first attempt really met the taken port
            assert server.http_port != taken_port
            client = await Client.connect(server.address)
            assert client.namespace == "default"
        finally:
            await server.astop()
