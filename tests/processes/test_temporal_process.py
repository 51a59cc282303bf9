"""The Temporal dev server child: ready for clients on free ports, and gone once stopped."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest
from temporalio.client import Client

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
