"""Records of running children, and stopping the ones an earlier owner left: a live child of
a dead owner is stopped, a child whose owner lives is in use, and a record whose pid now
names another process (or none) is stale and signals nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from plnt.processes import leftovers
from tests.support.plnt_server import wait_for
from tests.support.processes import kill_all

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)",
]

OWNER = textwrap.dedent(
    """
    import subprocess, sys
    from pathlib import Path
    from plnt.processes import leftovers
    child = subprocess.Popen(
        sys.argv[2:],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    leftovers.record(Path(sys.argv[1]), child.pid, what="sleeper")
    print(child.pid, flush=True)
    """
)


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids the test started (directly or through an owner): killed at the end."""
    pids: list[int] = []
    try:
        yield pids
    finally:
        kill_all(pids)


def left_by_a_dead_owner(record: Path, argv: list[str], started: list[int]) -> int:
    """A child whose owner recorded it and exited: the child keeps running."""
    owner = subprocess.run(
        [sys.executable, "-c", OWNER, str(record), *argv],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    pid = int(owner.stdout)
    started.append(pid)
    return pid


def ignores_sigterm(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


def test_a_child_whose_owner_died_is_found_stopped_and_its_record_removed(
    tmp_path: Path, started: list[int]
) -> None:
    record = tmp_path / "sleeper.pid"
    pid = left_by_a_dead_owner(record, SLEEPER, started)
    (stopped,) = leftovers.stop_left([record, tmp_path / "none.pid"])
    assert (stopped.what, stopped.pid) == ("sleeper", pid)
    assert leftovers.identity_of(pid) is None and not record.exists()


def test_a_child_that_ignores_sigterm_gets_sigkill_after_the_deadline(
    tmp_path: Path, started: list[int]
) -> None:
    record = tmp_path / "stubborn.pid"
    pid = left_by_a_dead_owner(record, STUBBORN, started)
    wait_for(lambda: ignores_sigterm(pid), timeout=20, message="SIGTERM ignored")
    (stopped,) = leftovers.stop_left([record], deadline=0.5)
    assert stopped.pid == pid and leftovers.identity_of(pid) is None


def test_a_child_whose_owner_lives_is_in_use_unless_shared(
    tmp_path: Path, started: list[int]
) -> None:
    child = subprocess.Popen(SLEEPER, stdin=subprocess.DEVNULL)
    started.append(child.pid)
    record = tmp_path / "mine.pid"
    leftovers.record(record, child.pid, what="sleeper")
    with pytest.raises(leftovers.InUse, match=f"sleeper \\(pid {child.pid}\\) is in use"):
        leftovers.stop_left([record])
    assert leftovers.stop_left([record], shared=True) == []
    assert child.poll() is None and record.exists()
    child.kill()
    child.wait()
    leftovers.forget(record, child.pid)
    assert not record.exists()


def test_a_record_whose_pid_now_names_another_process_is_stale(
    tmp_path: Path, started: list[int]
) -> None:
    other = subprocess.Popen(SLEEPER, stdin=subprocess.DEVNULL)
    started.append(other.pid)
    record = tmp_path / "recycled.pid"
    process = leftovers.identity_of(other.pid)
    assert process is not None
    document = {
        "what": "etcd",
        "process": {"pid": other.pid, "started": process.started - 1, "boot": process.boot},
        "owner": {"pid": 1, "started": 0, "boot": process.boot},
    }
    record.write_text(json.dumps(document))
    assert leftovers.stop_left([record]) == []
    assert other.poll() is None  # never signalled
    assert not record.exists()
    other.kill()
    other.wait()


def test_an_unreadable_record_is_removed(tmp_path: Path) -> None:
    record = tmp_path / "garbled.pid"
    record.write_text("{not json")
    assert leftovers.stop_left([record]) == []
    assert not record.exists()
