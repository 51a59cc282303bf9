"""`plnt.processes.apiprocesses` with real processes: a worker is ready once it says so, one that
exits first fails the start naming its code, stopping reaps every worker, and a worker
whose parent is killed exits by itself (no orphan keeps the port)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from plnt.processes import apiprocesses
from tests.support.plnt_server import wait_for

LISTENER = textwrap.dedent(
    """
    import signal, sys
    from plnt.processes import apiprocesses
    slot = apiprocesses.Slot.from_environment()
    apiprocesses.die_with_parent(slot.parent)
    apiprocesses.announce_ready(slot)
    signal.sigwait({signal.SIGTERM})
    """
)

PARENT = textwrap.dedent(
    """
    import asyncio, os, sys
    from pathlib import Path
    from plnt.processes import apiprocesses

    async def main():
        directory = apiprocesses.make_directory(Path(sys.argv[1]))
        child = apiprocesses.SiblingProcess(
            [sys.executable, "-c", sys.argv[2]],
            apiprocesses.Slot(1, 2, directory, parent=os.getpid()),
        )
        async with apiprocesses.running([child]):
            print(child.pid, flush=True)
            await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def _slot(tmp_path: Path, index: int = 1) -> apiprocesses.Slot:
    return apiprocesses.Slot(
        index, 2, apiprocesses.make_directory(tmp_path / "w"), parent=os.getpid()
    )


def test_a_worker_is_ready_once_it_says_so_and_stopping_reaps_it(tmp_path: Path) -> None:
    slot = _slot(tmp_path)
    child = apiprocesses.SiblingProcess([sys.executable, "-c", LISTENER], slot)

    async def scenario() -> int | None:
        async with apiprocesses.running([child]) as supervisors:
            assert [s.what for s in supervisors] == [apiprocesses.WHAT]
            ready = apiprocesses.ready_file(slot.directory, 1).read_text()
            assert ready == str(child.pid) and child.exit_code() is None
        return child.exit_code()

    assert asyncio.run(scenario()) == -signal.SIGTERM
    assert (slot.directory.stat().st_mode & 0o777) == 0o700


def test_a_worker_that_exits_before_it_listens_fails_the_start(tmp_path: Path) -> None:
    child = apiprocesses.SiblingProcess(
        [sys.executable, "-c", "raise SystemExit(3)"], _slot(tmp_path)
    )

    async def scenario() -> None:
        async with apiprocesses.running([child]):
            raise AssertionError("started")

    with pytest.raises(apiprocesses.SiblingFailed, match="worker 1 exited with code 3"):
        asyncio.run(scenario())


def test_a_worker_exits_when_its_parent_is_killed(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path / "w"), LISTENER],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    try:
        child = int(parent.stdout.readline())
        assert Path(f"/proc/{child}").exists()
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
    try:  # adopted by init (or a subreaper), reaped there once the parent-death signal ends it
        wait_for(lambda: not _alive(child), timeout=20, message="the orphaned worker to exit")
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
