"""The worker processes of one API server (`--workers N`): started, kept running, stopped.

One Python process serves requests on one core. With `--workers N` the process the
user started is worker 0 and the parent; it starts workers 1..N-1 as child processes
that listen on the same port (`SO_REUSEPORT`), each a full replica of the API server.
This module is the parent's side (`WorkerProcess`, `running`) and the child's side
(`Slot.from_environment`, `die_with_parent`, `announce_ready`), both independent of what
the child serves.

Rules:

* A child learns its slot from `PLNT_WORKER_SLOT` (JSON: index, count, directory, the
  parent's pid). The directory is private to the server (mode 0700).
* Its environment is a copy of plnt's own settings and nothing else
  (`plnt.processes.environments.replica`), the slot added.
* A child whose parent died exits too (`PR_SET_PDEATHSIG` → SIGTERM, and a check that
  the parent is still the one that started it), so no orphan keeps holding the port.
* Ready: a child writes `worker-<index>.ready` in the directory once it listens; the
  parent waits for that file (or the child's exit: `WorkerFailed`, with its exit code).
* A child that exits on its own is started again by a `Supervisor` (backoff, one warning
  line, `restarts` counted) under the name `apiserver-worker`.
* Stopping: the supervisors stop first, then every child gets SIGTERM and, after
  `STOP_DEADLINE_SECONDS`, SIGKILL; each is reaped before `running` returns.
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
WHAT = "apiserver-worker"
READY_TIMEOUT_SECONDS = 120.0
STOP_DEADLINE_SECONDS = 10.0
POLL_SECONDS = 0.05
_PR_SET_PDEATHSIG = 1


class WorkerFailed(RuntimeError):
    """A worker process did not become ready: it exited, or did not listen in time."""


@dataclass(frozen=True, slots=True)
class Slot:
    """Which worker a child process is, as the parent told it."""

    index: int
    count: int
    directory: Path
    parent: int

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


def ready_file(directory: Path, index: int) -> Path:
    return directory / f"worker-{index}.ready"


def make_directory(path: Path) -> Path:
    """`path`, created (or emptied of stale ready files) with mode 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    for stale in path.glob("worker-*.ready"):
        stale.unlink(missing_ok=True)
    return path


def die_with_parent(parent: int) -> None:
    """Have the kernel send this process SIGTERM when its parent exits (Linux), and exit
    now if the parent already has (it may have died before the request took effect)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def announce_ready(slot: Slot) -> None:
    """Tell the parent this worker listens (the file holds this process's pid)."""
    path = ready_file(slot.directory, slot.index)
    partial = path.with_suffix(".partial")
    partial.write_text(str(os.getpid()))
    partial.replace(path)


class WorkerProcess:
    """One child worker: `argv` started with its slot in the environment, restartable."""

    def __init__(self, argv: Sequence[str], slot: Slot, *, env: dict[str, str] | None = None):
        """`env`: the child's environment, the slot aside; `environments.replica()` if None."""
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
        """Start the child and wait until it listens; `WorkerFailed` if it does not."""
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
                    raise WorkerFailed(
                        f"worker {self.slot.index} exited with code {code} before it listened"
                    )
                if loop.time() > deadline:
                    raise WorkerFailed(
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


def siblings(argv: Sequence[str], count: int, directory: Path) -> list[WorkerProcess]:
    """Workers 1..count-1 of the server this process is worker 0 of: `argv` each, told
    its slot in `directory`."""
    return [
        WorkerProcess(argv, Slot(index, count, directory, parent=os.getpid()))
        for index in range(1, count)
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
async def running(workers: Sequence[WorkerProcess]) -> AsyncIterator[list[Supervisor]]:
    """Start every worker (each ready before the block runs) and supervise them while the
    block runs; on exit the supervisors stop, then every worker is stopped and reaped."""
    try:
        async with asyncio.TaskGroup() as group:  # one that fails cancels the others' starts
            for worker in workers:
                group.create_task(worker.astart())
    except BaseExceptionGroup as errors:
        await asyncio.gather(*(worker.astop() for worker in workers))
        raise errors.exceptions[0] from None
    try:
        async with contextlib.AsyncExitStack() as stack:
            supervisors = [
                await stack.enter_async_context(supervising(worker, what=WHAT))
                for worker in workers
            ]
            yield supervisors
    finally:
        await asyncio.gather(*(worker.astop() for worker in workers))
