"""SIGINT and SIGTERM as an event: how every long-running plnt command is asked to stop.

`plnt up`, `plnt serve` and `plnt worker` serve until the user interrupts them or their
supervisor (systemd, the kubelet) sends SIGTERM; then each shuts its parts down in order
instead of dying mid-write. `run_until_signalled` is that shape for a blocking entry
point. Errors: none of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from plnt.processes import eventloops

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_event() -> Iterator[asyncio.Event]:
    """An event that SIGINT or SIGTERM sets while the block runs (on the running loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        yield stop
    finally:
        for signum in STOP_SIGNALS:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)


def run_until_signalled(serve: Callable[[asyncio.Event], Awaitable[T]]) -> T:
    """Blocking: `serve(stop)` on a new event loop (`eventloops`: uvloop unless told or
    missing), `stop` set by SIGINT or SIGTERM."""

    async def main() -> T:
        with stop_event() as stop:
            return await serve(stop)

    return eventloops.run(main())
