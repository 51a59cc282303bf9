"""CPU time of the benchmarks' processes, from /proc: what a request cost each side.

Why: on a small shared machine a rate ratio is bounded by whatever else runs there, the
load generator first of all, so plnt at 0.4x raw etcd may say more about the two cores
than about plnt. CPU time per request depends much less on who else was scheduled (it
still grows somewhat with contention: caches, context switches): it says what plnt
spends on a request against what the floor beneath it (etcd, Temporal, a runner) spends
on its own. Every row (`CpuRow`) prints both sides, their ratio and the
processes that also worked during plnt's phase (etcd serves plnt's writes, a runner
answers plnt's proxied calls), so a reader can add them.

A `Meter` watches named groups (`Watched`): one process, or a process and its
descendants minus pruned subtrees (`plnt up` without the etcd it runs, measured apart).
A snapshot reads utime + stime of each live member and cutime + cstime (children it has
reaped), in clock ticks (`SC_CLK_TCK`), so a descendant that exits and is reaped inside
the group stays counted. Descendants are found again at each snapshot.

Linux only. Nothing here raises: a process that is gone, or a machine without /proc,
reads as absent, and rows print `-` where a side is unknown.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class StatTimes:
    """The fields of `/proc/PID/stat` a CPU reading needs; times in clock ticks."""

    pid: int
    name: str
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int

    @property
    def seconds(self) -> float:
        """CPU seconds of the process and of the children it has reaped."""
        return (self.utime + self.stime + self.cutime + self.cstime) / CLOCK_TICKS


def parse_stat(text: str) -> StatTimes:
    """One `/proc/PID/stat` line. The name may hold spaces and parentheses: it ends at
    the last `)`. After it, field 4 (ppid) is [1] and fields 14-17 (utime, stime, cutime,
    cstime) are [11:15]."""
    head, _, tail = text.rpartition(")")
    pid, _, name = head.partition(" (")
    fields = tail.split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return StatTimes(int(pid), name, int(fields[1]), utime, stime, cutime, cstime)


def read_stat(pid: int) -> StatTimes | None:
    """`pid`'s times now; None when it is gone or /proc cannot say."""
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace"))
    except (OSError, ValueError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds `pid` (and its reaped children) used so far."""
    stat = read_stat(pid)
    return stat.seconds if stat is not None else None


def all_stats() -> list[StatTimes]:
    """Every process /proc lists that could be read."""
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir(PROC):
            if entry.isdigit() and (stat := read_stat(int(entry))) is not None:
                found.append(stat)
    return found


def descendants(root: int, stats: Iterable[StatTimes], *, prune: Iterable[int] = ()) -> set[int]:
    """Every process below `root` in `stats`, without the subtrees rooted at `prune`."""
    below: dict[int, list[int]] = {}
    for stat in stats:
        below.setdefault(stat.ppid, []).append(stat.pid)
    pruned = set(prune)
    found: set[int] = set()
    frontier = [root]
    while frontier:
        for child in below.get(frontier.pop(), []):
            if child not in pruned and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def children_named(parent: int, name: str) -> list[int]:
    """The pids of `parent`'s children whose command name is `name` (e.g. plnt up's etcd)."""
    return [stat.pid for stat in all_stats() if stat.ppid == parent and stat.name == name]


def children_running(parent: int, module: str) -> list[int]:
    """The pids of `parent`'s children whose command line runs `module` (`-m MODULE`):
    how the sibling API processes of `plnt up --workers N` are told from its other
    children (etcd, the fork server)."""
    found = []
    for stat in all_stats():
        if stat.ppid != parent:
            continue
        with contextlib.suppress(OSError):
            if module.encode() in (PROC / str(stat.pid) / "cmdline").read_bytes().split(b"\0"):
                found.append(stat.pid)
    return found


def listening_pid(port: int) -> int | None:
    """The process listening on TCP `port` (any address), found through its socket's inode
    in /proc/net/tcp{,6} and then among the fds /proc lets this user read; None if none.

    Why: a runner that `plnt up` forked is known to the benchmark only by its endpoint."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for row in (PROC / "net" / table).read_text().splitlines()[1:]:
                fields = row.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{inode}]")
    if not inodes:
        return None
    for stat in all_stats():
        with contextlib.suppress(OSError):
            for fd in os.listdir(PROC / str(stat.pid) / "fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(PROC / str(stat.pid) / "fd" / fd) in inodes:
                        return stat.pid
    return None


@dataclass(frozen=True, slots=True)
class Watched:
    """A named group whose CPU is summed: `pid`, and with `tree` its descendants less the
    subtrees of `prune`. A None `pid` (a process not started) reads as absent."""

    name: str
    pid: int | None
    tree: bool = False
    prune: frozenset[int] = frozenset()


class Meter:
    """Snapshots of the CPU seconds of each watched group, and what a phase used."""

    def __init__(self, watched: Sequence[Watched]) -> None:
        self.watched = tuple(watched)

    def snapshot(self) -> dict[str, float]:
        """Each group's CPU seconds so far; a group whose process is gone is left out."""
        trees = any(w.tree for w in self.watched)
        stats = {s.pid: s for s in all_stats()} if trees else {}
        out: dict[str, float] = {}
        for group in self.watched:
            if group.pid is None:
                continue
            if group.tree:
                root = stats.get(group.pid)
                if root is None:
                    continue
                members = descendants(group.pid, stats.values(), prune=group.prune)
                out[group.name] = root.seconds + sum(stats[pid].seconds for pid in members)
            elif (seconds := cpu_seconds(group.pid)) is not None:
                out[group.name] = seconds
        return out

    def since(self, before: Mapping[str, float]) -> dict[str, float]:
        """CPU seconds each group used since `before`: groups read both times only, never
        below zero (a member that exited unreaped takes its time with it)."""
        now = self.snapshot()
        return {name: max(0.0, now[name] - was) for name, was in before.items() if name in now}


def per_request_ms(used: Mapping[str, float], name: str, requests: int) -> float | None:
    """Group `name`'s CPU milliseconds per request of a phase; None when unknown."""
    if name not in used or requests <= 0:
        return None
    return used[name] * 1000.0 / requests


@dataclass(frozen=True, slots=True)
class CpuRow:
    """One printed row: plnt's CPU per request against the floor's, and their ratio.

    `plnt_ms` counts plnt's processes only (`plnt`); `beside` names the other processes'
    CPU per request, mostly during plnt's phase (etcd storing plnt's writes, a runner
    answering plnt's calls), so the reader sees what plnt's requests cost them too.
    """

    label: str
    plnt: str  # which processes plnt_ms covers
    plnt_ms: float | None
    floor: str  # which process floor_ms covers, in which phase
    floor_ms: float | None
    target: float | None = None
    beside: tuple[tuple[str, float | None], ...] = ()

    @property
    def ratio(self) -> float | None:
        if self.plnt_ms is None or not self.floor_ms:
            return None
        return self.plnt_ms / self.floor_ms

    @property
    def passed(self) -> bool | None:
        if self.target is None or self.ratio is None:
            return None
        return self.ratio <= self.target

    def line(self) -> str:
        ratio = _number(self.ratio, ".2f")
        if self.target is None:
            verdict = "(no target)"
        else:
            mark = {True: "PASS", False: "MISS", None: "-"}[self.passed]
            verdict = f"(target <= {self.target:g}) {mark}"
        text = (
            f"cpu/req {self.label:<14} plnt {_number(self.plnt_ms, '.3f')} ms, "
            f"floor {_number(self.floor_ms, '.3f')} ms, ratio {ratio} {verdict}"
            f"  [plnt: {self.plnt}; floor: {self.floor}]"
        )
        if self.beside:
            text += "; also " + ", ".join(
                f"{name} {_number(ms, '.3f')} ms" for name, ms in self.beside
            )
        return text

    def as_json(self) -> dict[str, object]:
        return {
            "plnt": self.plnt,
            "plnt_ms": self.plnt_ms,
            "floor": self.floor,
            "floor_ms": self.floor_ms,
            "ratio": self.ratio,
            "target": self.target,
            "beside_ms": dict(self.beside),
        }


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)
