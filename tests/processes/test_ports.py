"""Free loopback ports: picked where no outgoing connection can take them first."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from plnt.processes import ports


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    low = _ephemeral_low()
    assert low - ports.LOWEST >= 1000, "this machine's range leaves room below it"
    picked = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST <= port < low for port in picked)
    assert len(picked) > 1  # spread, not one port handed to every child
    for port in picked:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_the_kernel_picks_when_the_range_leaves_no_room_below_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cramped = tmp_path / "ip_local_port_range"
    cramped.write_text("10500\t60999\n")
    monkeypatch.setattr(ports, "_EPHEMERAL_RANGE", cramped)
    ports._below_ephemeral.cache_clear()
    try:
        port = ports.free_port()
    finally:
        ports._below_ephemeral.cache_clear()
    assert port >= 10500
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        choices = iter([busy, busy, ports.LOWEST + 7])
        monkeypatch.setattr(ports.random, "randint", lambda _low, _high: next(choices))
        assert ports.free_port() == ports.LOWEST + 7


def test_a_child_that_lost_its_port_is_recognised_from_its_log() -> None:
    assert ports.lost_port_race("listen tcp 127.0.0.1:42993: bind: address already in use")
    assert ports.lost_port_race("OSError: [Errno 98] Address already in use")
    assert not ports.lost_port_race("permission denied")
