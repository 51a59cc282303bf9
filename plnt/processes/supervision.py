"""Keeping a child process running: start it again, with backoff, when it exits on its own.

Why: standalone plnt owns its etcd and its Temporal dev server. A child that dies (the
OOM killer, a crash, a stray `kill`) would otherwise leave plnt answering 503 for every
write, or queueing every deploy, until a person restarts plnt. Supervised, the child is
back within about a second on the same ports and data, and the clients of it (the etcd
gRPC channel, the watch cache, the Temporal client and worker) reconnect by themselves.

Rules:

* The exit is noticed by polling the child every `poll_interval` (50 ms): asyncio has
  no portable watcher for a `Popen` child that any event loop may stop.
* One warning line per exit, with the pid, the exit code (a signal by name) and the
  delay before the restart. A start that fails is logged too and tried again.
* The delay starts at `Backoff.initial` and doubles, up to `Backoff.maximum`, while the
  child keeps dying young or failing to start; a child that stayed up `reset_after`
  seconds is restarted after `initial` again (kubelet's CrashLoopBackOff, in small).
* Stopping: leave the `supervising` block (or cancel `run`) *before* stopping the child,
  so a deliberate stop is never taken for a crash. A cancelled restart stops what it
  had started (the children's `astart` does).

The child is anything with `pid`, `exit_code()` and `arestart()`: `EtcdProcess` and
`TemporalDevServer` and `ModelServer` here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from plnt.processes import tasks

log = logging.getLogger(__name__)


class Child(Protocol):
    """What the supervisor needs of a child process."""

    @property
    def pid(self) -> int | None: ...

    def exit_code(self) -> int | None:
        """None while the child runs; its exit code once it has exited."""
        ...

    async def arestart(self) -> None:
        """Start the child again with the same ports and data; raise if it cannot."""
        ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """Delays between restarts, in seconds."""

    initial: float = 0.1
    maximum: float = 5.0
    reset_after: float = 30.0
    """A child up at least this long counts as healthy: its next restart waits `initial`."""

    def after_exit(self, delay: float, *, uptime: float) -> float:
        """The delay before restarting a child that was up `uptime` seconds, when the
        last restart's next delay was `delay`."""
        return self.initial if uptime >= self.reset_after else delay

    def next(self, delay: float) -> float:
        """The delay after one of `delay`: doubled, at most `maximum`."""
        return min(delay * 2, self.maximum)


def describe_exit(code: int) -> str:
    """`code 1`, or `code -9 (SIGKILL)` for a child ended by a signal."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"code {code} ({signal.Signals(-code).name})"
    return f"code {code}"


class Supervisor:
    """Restarts one child whenever it exits, until cancelled; `restarts` counts the
    successful restarts (what a metric reads)."""

    def __init__(
        self,
        child: Child,
        *,
        what: str,
        backoff: Backoff = Backoff(),
        poll_interval: float = 0.05,
    ) -> None:
        self.child = child
        self.what = what
        self.backoff = backoff
        self.poll_interval = poll_interval
        self.restarts = 0

    async def run(self) -> None:
        """Watch the child and restart it after every exit; returns only by cancellation."""
        loop = asyncio.get_running_loop()
        delay = self.backoff.initial
        started = loop.time()
        while True:
            pid, code = self.child.pid, await self._exited()
            delay = self.backoff.after_exit(delay, uptime=loop.time() - started)
            log.warning(
                "%s (pid %s) exited with %s; restarting it in %.1f s",
                self.what,
                pid,
                describe_exit(code),
                delay,
            )
            delay = await self._restart(delay)
            started = loop.time()
            self.restarts += 1

    async def _exited(self) -> int:
        while True:  # polling the child; see the module doc
            code = self.child.exit_code()
            if code is not None:
                return code
            await asyncio.sleep(self.poll_interval)

    async def _restart(self, delay: float) -> float:
        """Wait `delay`, start the child (retrying with backoff); the next delay."""
        while True:
            await asyncio.sleep(delay)  # the restart backoff
            delay = self.backoff.next(delay)
            try:
                await self.child.arestart()
            except Exception as error:  # keep trying: a dead child helps nobody
                log.warning(
                    "%s did not restart (%s); trying again in %.1f s", self.what, error, delay
                )
                continue
            return delay


@contextlib.asynccontextmanager
async def supervising(
    child: Child,
    *,
    what: str,
    backoff: Backoff = Backoff(),
) -> AsyncIterator[Supervisor]:
    """Supervise `child` (already started) while the block runs; on exit the supervisor
    stops (an in-flight restart is cancelled), and the child is left to the caller."""
    supervisor = Supervisor(child, what=what, backoff=backoff)
    async with tasks.running(supervisor.run(), name=f"supervise {what}"):
        yield supervisor
