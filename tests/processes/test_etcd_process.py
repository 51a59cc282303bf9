"""The etcd child process: starts healthy on free ports, keeps data, never outlives its owner."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from plnt.processes.etcd import EtcdProcess, EtcdProcessError
from plnt.storage.etcd import EtcdStore
from tests.support.etcd import make_etcd, running_etcd


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_etcd_starts_healthy_on_free_ports_and_is_reaped_when_stopped(tmp_path: Path) -> None:
    etcd = make_etcd(tmp_path)
    with etcd:
        pid = etcd.pid
        assert pid is not None
        assert etcd.running()
        assert etcd.client_port != etcd.peer_port
        assert etcd.endpoint == f"http://127.0.0.1:{etcd.client_port}"
    assert not etcd.running()
    assert _gone(pid)
    assert etcd.stop() is None


async def test_the_async_form_stops_etcd_even_when_the_body_raises(tmp_path: Path) -> None:
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"):
        async with running_etcd(tmp_path) as etcd:
            assert etcd.pid is not None
            pids.append(etcd.pid)
            raise RuntimeError("boom")
    assert _gone(pids[0])


async def test_data_survives_a_restart_on_the_same_data_dir(tmp_path: Path) -> None:
    async with running_etcd(tmp_path) as etcd, EtcdStore(etcd.endpoint) as store:
        created = await store.create("/kept", b"v")
    async with running_etcd(tmp_path) as etcd, EtcdStore(etcd.endpoint) as store:
        assert await store.get("/kept") == created


def test_start_fails_with_the_log_when_the_given_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        etcd = EtcdProcess(tmp_path / "data", client_port=taken.getsockname()[1])
        with pytest.raises(EtcdProcessError, match="address already in use"):
            etcd.start()
    assert not etcd.running()
