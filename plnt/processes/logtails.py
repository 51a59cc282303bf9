"""The last lines of a child process's log, for the one-line errors its start raises.

A child that exits or never becomes ready is reported with what it last logged, so
the user sees the cause (a taken port, a bad flag) without opening the log file.
"""

from __future__ import annotations

from pathlib import Path


def last_lines(path: Path, lines: int = 5) -> str:
    """The last `lines` lines of `path` joined by ` | `; says so when there are none."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"
