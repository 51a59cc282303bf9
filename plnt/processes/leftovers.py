"""Pid files for plnt's children, and stopping the children an earlier run left behind.

Why: a child that outlived its `plnt up` (one killed before its parent-death signal could
matter, a child that ignored it or is slow to act on it) keeps what the next start needs:
etcd holds its data directory's lock and the next etcd waits for it until its deadline
("etcd not healthy within 20 s", naming neither cause), Temporal holds its database, a
model server holds its port. Each child therefore writes a record beside its log when it
is spawned (`record`) and removes it when it is stopped (`forget`); the next start reads
the records in its state directory (`stop_left`) and stops what they name.

Identity, so a recycled pid is never signalled: a record holds the child's pid, its start
time (`/proc/PID/stat` field 22, clock ticks since boot, unchanged by `exec`) and the
boot's id (`/proc/sys/kernel/random/boot_id`). A pid whose start time or boot differs is
another process, and the record is stale. The record also names its owner (the process
that spawned the child, with its start time): while the owner is alive the child is not
left over but in use, and `stop_left` raises `InUse` instead of stopping anything (or,
for a child other processes may own beside plnt, passes it over: `shared`).

Stopping: SIGTERM, then SIGKILL once `deadline` seconds have passed, then a short wait
until the process is gone (a zombie counts as gone: its parent, not us, reaps it).
Linux-only, as the rest of plnt's process handling (`/proc`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

STOP_DEADLINE_SECONDS = 10.0
"""How long a leftover may take to exit after SIGTERM before it gets SIGKILL."""
_KILLED_SECONDS = 5.0
_POLL_SECONDS = 0.02
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


class InUse(Exception):
    """A record's owner is alive: the state directory is in use by another process."""

    def __init__(self, *, what: str, pid: int, owner: int) -> None:
        super().__init__(f"{what} (pid {pid}) is in use by process {owner}")
        self.what = what
        self.pid = pid
        self.owner = owner


@dataclass(frozen=True, slots=True)
class Identity:
    """One process, told apart from any later one with the same pid."""

    pid: int
    started: int
    """Clock ticks since boot at which it started."""
    boot: str

    def alive(self) -> bool:
        """True while this very process runs (not a zombie, not a recycled pid)."""
        return identity_of(self.pid) == self


@dataclass(frozen=True, slots=True)
class Leftover:
    """A child named by a record, whose owner is gone."""

    what: str
    process: Identity
    record: Path

    @property
    def pid(self) -> int:
        return self.process.pid


def identity_of(pid: int) -> Identity | None:
    """The live (non-zombie) process `pid` as it is now; None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = _BOOT_ID.read_text().strip()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return Identity(pid=pid, started=int(fields[19]), boot=boot)


def record_path(log: Path) -> Path:
    """Where the record of the child logging to `log` lives: beside it, `.pid`."""
    return log.with_suffix(".pid")


def record(path: Path, pid: int, *, what: str) -> None:
    """Write the record of child `pid` (`what` names it in messages), owned by this process.

    Best effort: a child whose record cannot be written still runs (it only could not be
    found by a later start)."""
    process = identity_of(pid)
    owner = identity_of(os.getpid())
    if process is None or owner is None:
        return
    document = {"what": what, "process": _fields(process), "owner": _fields(owner)}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(document) + "\n")
        partial.replace(path)


def forget(path: Path, pid: int | None) -> None:
    """Remove the record of child `pid` (left alone when it names another process)."""
    if pid is None:
        return
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        if int(json.loads(path.read_text())["process"]["pid"]) == pid:
            path.unlink()


def find(path: Path, *, shared: bool = False) -> Leftover | None:
    """The child `path` records when it still runs and its owner does not; None when the
    record is missing, unreadable or names a process that is gone (the record is then
    removed). A child whose owner is alive raises `InUse`, or with `shared` (a child some
    other live process may own, such as a worker's fork server) is passed over (None)."""
    try:
        document = json.loads(path.read_text())
        what = str(document["what"])
        process = _identity(document["process"])
        owner = _identity(document["owner"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    if not process.alive():
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    if owner.alive():
        if shared:
            return None
        raise InUse(what=what, pid=process.pid, owner=owner.pid)
    return Leftover(what=what, process=process, record=path)


def stop(leftover: Leftover, *, deadline: float = STOP_DEADLINE_SECONDS) -> None:
    """SIGTERM the leftover, SIGKILL it after `deadline` seconds; return once it is gone
    (or did not go within a few seconds of SIGKILL); its record is removed."""
    process = leftover.process
    for signum, wait in ((signal.SIGTERM, deadline), (signal.SIGKILL, _KILLED_SECONDS)):
        if not process.alive():
            break
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)
        _wait_gone(process, time.monotonic() + wait)
    with contextlib.suppress(OSError):
        leftover.record.unlink()


def stop_left(
    paths: Iterable[Path], *, shared: bool = False, deadline: float = STOP_DEADLINE_SECONDS
) -> list[Leftover]:
    """Stop every leftover the records at `paths` name (`find` says which, and what
    `shared` means); what was stopped, in order.

    Every record is read before anything is stopped, so a directory in use (`InUse`)
    stops nothing."""
    found = [leftover for path in paths if (leftover := find(path, shared=shared)) is not None]
    for leftover in found:
        stop(leftover, deadline=deadline)
    return found


def _wait_gone(process: Identity, until: float) -> None:
    while process.alive() and time.monotonic() < until:
        time.sleep(_POLL_SECONDS)  # another process's child: nothing to wait on but /proc


def _fields(process: Identity) -> dict[str, object]:
    return {"pid": process.pid, "started": process.started, "boot": process.boot}


def _identity(fields: dict[str, object]) -> Identity:
    return Identity(
        pid=int(str(fields["pid"])), started=int(str(fields["started"])), boot=str(fields["boot"])
    )
