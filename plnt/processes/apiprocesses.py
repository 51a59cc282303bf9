"""The API processes of one server (`--workers N`): their slots, and the siblings started,
kept running and stopped.

One Python process serves requests on one core. With `--workers N` the process the
user started is API process 0; once it listens it starts processes 1..N-1, its
*siblings*, which listen on the same port (`SO_REUSEPORT`), each a full replica of the
API server. Which of the N a process is, is its `Slot`, the one type every side uses:
the server's settings carry it (`ServerSettings.slot`), `plnt.apiserver.peers` finds the
siblings' sockets by it, and a sibling reads it from its environment. This module is
process 0's side (`running_siblings`) and the sibling's (`Slot.from_environment`,
`die_with_parent`, `announce_ready`), both independent of what the processes serve.
(The word *worker* belongs to the deploy worker; the flag keeps its name, `--workers`,
and so do the environment variable and the restart metric's label.)

Rules:

* A sibling learns its slot from `PLNT_WORKER_SLOT` (JSON: index, count, directory, the
  parent's pid). The directory is private to the server (mode 0700).
* Its environment is a copy of plnt's own settings and nothing else
  (`plnt.processes.environments.replica`), the slot added.
* A sibling whose parent died exits too (`PR_SET_PDEATHSIG` → SIGTERM, and a check that
  the parent is still the one that started it), so no orphan keeps holding the port.
* Ready: a sibling writes `worker-<index>.ready` in the directory once it listens; the
  parent waits for that file (or the sibling's exit: `SiblingFailed`, with its exit code).
* A sibling that exits on its own is started again by a `Supervisor` (backoff, one
  warning line, `restarts` counted) under the name `apiserver-worker`.
* Stopping: the supervisors stop first, then every sibling gets SIGTERM and, after
  `STOP_DEADLINE_SECONDS`, SIGKILL; each is reaped before `running_siblings` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from plnt.processes import environments
from plnt.processes.supervision import Supervisor, supervising

log = logging.getLogger(__name__)

SLOT_ENV = "PLNT_WORKER_SLOT"
"""The environment variable a sibling reads its slot from (its name predates the word
*API process*; it is part of how `plnt serve` is deployed, so it stays)."""
WHAT = "apiserver-worker"
"""What the supervisors, their log lines and `plnt_child_restarts_total{child}` call a
sibling (unchanged, since dashboards select on it)."""
READY_TIMEOUT_SECONDS = 120.0
STOP_DEADLINE_SECONDS = 10.0
POLL_SECONDS = 0.05
_PR_SET_PDEATHSIG = 1


class SiblingFailed(RuntimeError):
    """A sibling did not become ready: it exited, or did not listen in time."""


@dataclass(frozen=True, slots=True)
class Slot:
    """Which of a server's N API processes this one is (`--workers N`).

    The N processes share the listening port (`SO_REUSEPORT`) and each is a full replica
    with its own watch cache. `directory` is private to the server (mode 0700): each
    process listens there on a Unix socket of its own (`plnt.apiserver.peers`), through
    which the one that answers `/metrics` or a run's invocation log reaches its siblings,
    and a sibling announces there that it listens. `parent` is the pid of process 0, as a
    sibling was told it; None in process 0 itself, which no API process started.
    """

    index: int
    count: int
    directory: Path
    parent: int | None = None

    @property
    def is_sibling(self) -> bool:
        """True in processes 1..N-1, which process 0 started (and which start none)."""
        return self.index > 0

    def to_environment(self) -> str:
        return json.dumps(
            {
                "index": self.index,
                "count": self.count,
                "directory": str(self.directory),
                "parent": self.parent,
            }
        )

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Slot | None:
        """The slot `PLNT_WORKER_SLOT` names; None in a process the user started."""
        text = (os.environ if environ is None else environ).get(SLOT_ENV)
        if not text:
            return None
        data = json.loads(text)
        return cls(
            index=int(data["index"]),
            count=int(data["count"]),
            directory=Path(data["directory"]),
            parent=int(data["parent"]),
        )


def first(count: int, directory: Path) -> Slot:
    """Process 0's slot of `count`, its private `directory` created (`make_directory`)."""
    return Slot(0, count, make_directory(directory))


def ready_file(directory: Path, index: int) -> Path:
    return directory / f"worker-{index}.ready"


def make_directory(path: Path) -> Path:
    """`path`, created (or emptied of stale ready files) with mode 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    for stale in path.glob("worker-*.ready"):
        stale.unlink(missing_ok=True)
    return path


def die_with_parent(parent: int | None) -> None:
    """Have the kernel send this process SIGTERM when its parent exits (Linux), and exit
    now if the parent already has (it may have died before the request took effect)."""
    if parent is None:
        return
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def announce_ready(slot: Slot) -> None:
    """Tell the parent this sibling listens (the file holds this process's pid)."""
    path = ready_file(slot.directory, slot.index)
    partial = path.with_suffix(".partial")
    partial.write_text(str(os.getpid()))
    partial.replace(path)


class SiblingProcess:
    """One sibling: `argv` started with its slot in the environment, restartable."""

    def __init__(self, argv: Sequence[str], slot: Slot, *, env: dict[str, str] | None = None):
        """`env`: the sibling's environment, the slot aside; `environments.replica()` if None."""
        self.argv = list(argv)
        self.slot = slot
        self._env = environments.replica() if env is None else dict(env)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    async def astart(self) -> None:
        """Start the sibling and wait until it listens; `SiblingFailed` if it does not."""
        ready = ready_file(self.slot.directory, self.slot.index)
        ready.unlink(missing_ok=True)
        env = {**self._env, SLOT_ENV: self.slot.to_environment()}
        self._process = self._spawn(env)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT_SECONDS
        try:
            while not ready.exists():
                code = self._process.poll()
                if code is not None:
                    raise SiblingFailed(
                        f"worker {self.slot.index} exited with code {code} before it listened"
                    )
                if loop.time() > deadline:
                    raise SiblingFailed(
                        f"worker {self.slot.index} did not listen within "
                        f"{READY_TIMEOUT_SECONDS:.0f} s"
                    )
                await asyncio.sleep(POLL_SECONDS)  # polling the ready file and the child
        except BaseException:
            await self.astop()
            raise

    async def arestart(self) -> None:
        await self.astart()

    async def astop(self, deadline: float = STOP_DEADLINE_SECONDS) -> None:
        """SIGTERM, then SIGKILL after `deadline` seconds; reaped on return."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        await asyncio.shield(asyncio.to_thread(_stop, process, deadline))

    def _spawn(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        """Popen in the event loop's own thread, never a pool's: the kernel's parent-death
        signal follows the *thread* that forked, and a pool's thread may end any time."""
        return subprocess.Popen(self.argv, env=env, stdin=subprocess.DEVNULL)


def siblings(argv: Sequence[str], slot: Slot) -> list[SiblingProcess]:
    """Processes 1..N-1 of the server whose process 0 holds `slot`: `argv` each, told its
    slot in the same directory, with this process as their parent."""
    return [
        SiblingProcess(argv, Slot(index, slot.count, slot.directory, parent=os.getpid()))
        for index in range(1, slot.count)
    ]


def _stop(process: subprocess.Popen[bytes], deadline: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.terminate()
    try:
        process.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait()


@contextlib.asynccontextmanager
async def running(processes: Sequence[SiblingProcess]) -> AsyncIterator[list[Supervisor]]:
    """Start every sibling (each ready before the block runs) and supervise them while the
    block runs; on exit the supervisors stop, then every sibling is stopped and reaped."""
    try:
        async with asyncio.TaskGroup() as group:  # one that fails cancels the others' starts
            for process in processes:
                group.create_task(process.astart())
    except BaseExceptionGroup as errors:
        await asyncio.gather(*(process.astop() for process in processes))
        raise errors.exceptions[0] from None
    try:
        async with contextlib.AsyncExitStack() as stack:
            supervisors = [
                await stack.enter_async_context(supervising(process, what=WHAT))
                for process in processes
            ]
            yield supervisors
    finally:
        await asyncio.gather(*(process.astop() for process in processes))


def running_siblings(
    argv: Sequence[str], slot: Slot
) -> contextlib.AbstractAsyncContextManager[list[Supervisor]]:
    """The one way a server's siblings start: processes 1..N-1 of `slot` (process 0's),
    each `argv`, ready before the block runs, supervised while it runs, stopped and
    reaped when it ends (`running`)."""
    return running(siblings(argv, slot))
