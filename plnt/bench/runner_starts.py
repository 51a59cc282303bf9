"""The floor under apply → Ready: how long one runner takes to start, executed and forked.

A local deploy waits for its runner to answer `/readyz`; everything else in it is the
saga's (Temporal round trips, status writes, smoke and analysis). Measured in the same run
as the deploys, the two ways a runner can start show what a deploy cannot go below and
what the pre-warmed server saves:

* **executed**: `python -m plnt.runner …` as a new process, Python's start-up and the
  runner's imports included (what every deploy paid before the fork server);
* **forked**: the same command line through `plnt.processes.forkserver` (what the local
  target does now), only the runner's own set-up (spec, backend, bind).

Each start runs from just before the request to the first `GET /readyz` answered 200
(polled every millisecond), on the example workflow with the echo backend; the runner
is then stopped and waited for before the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from plnt.bench import apiserver as harness
from plnt.processes import forkserver
from plnt.processes.ports import free_port

_POLL_SECONDS = 0.001
_READY_WITHIN = 60.0


@dataclass(slots=True)
class RunnerStarts:
    """Seconds from the start request to the first ready answer, each way."""

    executed: list[float] = field(default_factory=list)
    forked: list[float] = field(default_factory=list)


def runner_argv(spec: Path, port: int) -> list[str]:
    """A runner of `spec` on the echo backend, as the local target would execute it."""
    return [
        sys.executable,
        "-X",
        "plnt-replica=bench",
        "-m",
        "plnt.runner",
        "--spec",
        str(spec),
        "--backend-type",
        "echo",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


async def _until_ready(
    session: aiohttp.ClientSession, port: int, alive: Callable[[], bool]
) -> None:
    deadline = time.monotonic() + _READY_WITHIN
    while time.monotonic() < deadline:
        if not alive():
            raise harness.BenchmarkError(f"the runner on port {port} exited before it was ready")
        with contextlib.suppress(aiohttp.ClientError):
            async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                if response.status == 200:
                    return
        await asyncio.sleep(_POLL_SECONDS)
    raise harness.BenchmarkError(
        f"the runner on port {port} was not ready within {_READY_WITHIN} s"
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


async def _stop(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    # The fork server's child, not ours: nothing to wait on but /proc.
    while _alive(pid) and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def _executed(session: aiohttp.ClientSession, spec: Path, log: Path) -> float:
    port = free_port()
    started = time.monotonic()
    with log.open("wb") as output:
        process = await asyncio.create_subprocess_exec(
            *runner_argv(spec, port), stdin=asyncio.subprocess.DEVNULL, stdout=output, stderr=output
        )
    try:
        await _until_ready(session, port, lambda: process.returncode is None)
        return time.monotonic() - started
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()


async def _forked(
    session: aiohttp.ClientSession, server: forkserver.ForkServer, spec: Path, log: Path
) -> float:
    port = free_port()
    started = time.monotonic()
    pid = await asyncio.to_thread(server.spawn, runner_argv(spec, port), log_path=log)
    try:
        await _until_ready(session, port, lambda: _alive(pid))
        return time.monotonic() - started
    finally:
        await _stop(pid)


async def measure(spec: Path, workdir: Path, *, count: int) -> RunnerStarts:
    """`count` executed starts, then `count` forked ones (after one unmeasured of each)."""
    results = RunnerStarts()
    logs = workdir / "runner-starts"
    logs.mkdir(parents=True, exist_ok=True)
    server = forkserver.ForkServer(sys.executable, log_path=logs / "forkserver.log")
    try:
        await asyncio.to_thread(server.start)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            await _executed(session, spec, logs / "warm-executed.log")
            for index in range(count):
                results.executed.append(await _executed(session, spec, logs / f"e{index}.log"))
            await _forked(session, server, spec, logs / "warm-forked.log")
            for index in range(count):
                results.forked.append(await _forked(session, server, spec, logs / f"f{index}.log"))
    finally:
        await asyncio.to_thread(server.close)
    return results
