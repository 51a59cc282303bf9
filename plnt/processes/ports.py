"""Loopback ports for child processes: etcd, Temporal, runners, model servers, test servers.

Where the ports come from: below the kernel's ephemeral range
(`net.ipv4.ip_local_port_range`, 32768-60999 by default). The kernel hands ports from
that range to every outgoing connection, so a port picked there and released can be
given to any process's `connect()` in the moment before the child binds it; under load
(a test run, a benchmark opening thousands of connections) that happened. Below the
range only another explicit bind can take it. When the range leaves too little room
below it, the kernel's own pick (`bind(("127.0.0.1", 0))`) is used.

Why "free a moment ago" is still good enough: the port is bound by a child that fails
loudly when another process took it first. Each starter that picked its ports itself
recognises that failure from the child's log (`lost_port_race`) and starts again with
new ports (`PortRace`), so the window between this check and the bind costs a retry,
never a connection to the wrong server. A port the caller chose, or one a restart must
keep, is not retried: there "address already in use" is the caller's error to see.
"""

from __future__ import annotations

import functools
import random
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

PORT_ATTEMPTS = 3
"""How many times a starter picks fresh ports after losing them to another process."""

LOWEST = 10000
"""The lowest port picked: above the well-known and most registered services' ports."""

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_CANDIDATES = 64
"""Random ports tried below the ephemeral range before leaving the pick to the kernel."""


class PortRace(Exception):
    """A port picked a moment ago was taken before the child bound it: pick again."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, outside the ephemeral range."""
    highest = _below_ephemeral()
    if highest is not None:
        for _ in range(_CANDIDATES):
            port = random.randint(LOWEST, highest)
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def lost_port_race(log: str) -> bool:
    """True when a child's output says a port it was told to bind was taken (EADDRINUSE)."""
    return "address already in use" in log.lower()


def race_or(error: Exception, tail: str, *, retryable: bool) -> Exception:
    """What a child that exited during start-up with log `tail` ends its attempt with:
    `PortRace` when it lost a port the starter may pick again, else `error`."""
    return PortRace() if retryable and lost_port_race(tail) else error


@functools.cache
def _below_ephemeral() -> int | None:
    """The highest port under the ephemeral range, or None when there is too little room."""
    try:
        low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return low - 1 if low - LOWEST >= 1000 else None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


async def start_until_bound(
    attempts: int,
    start: Callable[[bool], Awaitable[None]],
    stop: Callable[[], Awaitable[object]],
) -> None:
    """Call `start(retryable)` (pick ports, spawn, wait until ready) until it does not end
    in `PortRace`, at most `attempts` times; `retryable` is False on the last attempt, so
    a child that loses its port then fails with its own error. Whatever ends an attempt,
    `stop` has reaped the child before the next attempt or the exception leaves."""
    for attempt in range(attempts):
        try:
            await start(attempt + 1 < attempts)
            return
        except PortRace:
            await stop()
        except BaseException:
            await stop()
            raise
