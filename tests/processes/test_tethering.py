"""A tethered child dies with the process that started it, even one killed with SIGKILL; the
wrapper leaves the child's own command line, pid and exit code as they would be."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from plnt.processes import leftovers, tethering
from tests.support.plnt_server import wait_for
from tests.support.processes import kill_all

PARENT = textwrap.dedent(
    """
    import subprocess, sys, time
    from plnt.processes import tethering
    child = subprocess.Popen(
        tethering.tethered([sys.executable, "-c", "import time; time.sleep(600)"]),
        stdin=subprocess.DEVNULL,
        process_group=0,
    )
    print(child.pid, flush=True)
    time.sleep(600)
    """
)


def command_line(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]


def test_a_tethered_child_gets_sigterm_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    assert parent.stdout is not None
    child = 0
    try:
        child = int(parent.stdout.readline())
        process = leftovers.identity_of(child)
        assert process is not None
        # The wrapper has exec'd the child's own program by the time it shows it.
        wait_for(
            lambda: command_line(child) == [sys.executable, "-c", "import time; time.sleep(600)"],
            timeout=20,
            message="the child's own command line",
        )
        parent.kill()
        parent.wait()
        wait_for(lambda: not process.alive(), timeout=20, message="the orphan to exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()
        if child:
            kill_all([child])


def test_the_wrapped_command_keeps_its_pid_and_exit_code() -> None:
    script = "import os, sys; print(os.getpid()); sys.exit(7)"
    child = subprocess.Popen(
        tethering.tethered([sys.executable, "-c", script]), stdout=subprocess.PIPE, text=True
    )
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 7
    assert int(out) == child.pid


def test_a_child_whose_parent_is_already_gone_does_not_run() -> None:
    # As when the parent dies between fork and the wrapper's prctl: the owner it names is
    # not its parent, so it exits before running anything.
    done = subprocess.run(
        tethering.tethered([sys.executable, "-c", "print('ran')"], parent=os.getpid() + 10**6),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and "ran" not in done.stdout
