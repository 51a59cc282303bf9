"""Finding and ending processes by their command line, for fixtures that must leave nothing.

Tests count real processes (runners, servers) instead of trusting records, and clean up
after a failure by the same rule. Zombies do not count as live.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path


def live_processes(*needles: str) -> set[int]:
    """Pids of live (non-zombie) processes whose command line contains every needle."""
    found: set[int] = set()
    wanted = [needle.encode() for needle in needles]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state = stat.rpartition(")")[2].split()[:1]
        if state and state[0] not in ("Z", "X") and all(w in command for w in wanted):
            found.add(int(entry))
    return found


def kill_all(pids: Iterable[int]) -> None:
    """SIGKILL each pid that still exists (reaping it when it is our child)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # only our children can be waited for; others raise at once
