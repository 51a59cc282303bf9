"""Where an invocation goes, and what happened to the recent ones.

The saga publishes, in `status.traffic`, the revisions that take invocations with their
weights and the base URLs of their ready runners. `Balancer` turns that into one choice
per call: a revision at random in proportion to its weight (revisions with weight 0 or
no endpoints never), then, among its endpoints, the one with the fewest invocations in
flight from this API server (ties broken round robin, so an idle pool is still spread).
In-flight counts are per process: each API server replica balances its own calls.

`InvocationLog` keeps the last `size` invocations of each run in memory, for
`GET …/invocationlog`, oldest first by `time`; it is lost on restart, like an access log.
On one of several worker processes (`--workers`) each entry it records is also handed to
`forward` (`sharing` publishes it to the siblings), and the siblings' entries come in
through `receive`, so every worker's log is the whole server's. A
watch of the log (`?watch=true`) is a `Follower` that `record` feeds: a queue bounded at
`FOLLOWER_BACKLOG` entries. A watcher that falls further behind than that (its client
reads too slowly to keep up) is ended instead of buffering without bound, as
kube-apiserver's watch cache ends a watcher whose channel stays full: it still gets what
was queued, then its stream ends, and the client lists again.

No I/O here; errors: none.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from plnt.api.runs import RunKey
from plnt.apiserver.backlogs import Backlog
from plnt.apiserver.workflowruns import attainment

LOG_SIZE = 100
LOGGED_RUNS = 10_000
FOLLOWER_BACKLOG = 1_000
"""Entries a log watcher may have queued and not yet sent; one more ends it."""

Forward = Callable[[str, str, dict[str, Any]], None]
"""Where a log hands what it records for the sibling workers: (namespace, name, item)."""


def insert_by_time(entries: deque[dict[str, Any]], entry: dict[str, Any]) -> bool:
    """Put `entry` into `entries` (oldest first by their RFC 3339 `time`, bounded by the
    deque's maxlen) after every entry of the same or an earlier time: a sibling's entry
    may arrive after a later local one. Searched from the newest end, where it almost
    always goes. False when it is older than everything a full deque keeps (not kept)."""
    time = entry.get("time", "")
    at = len(entries)
    while at > 0 and entries[at - 1].get("time", "") > time:
        at -= 1
    if at == len(entries):
        entries.append(entry)
        return True
    if entries.maxlen is not None and len(entries) >= entries.maxlen:
        if at == 0:
            return False
        entries.popleft()
        at -= 1
    entries.insert(at, entry)
    return True


@dataclass(frozen=True, slots=True)
class Target:
    """One revision of `status.traffic` that may take invocations."""

    revision: int
    digest: str
    weight: int
    endpoints: tuple[str, ...]


def targets_of(status: Any) -> list[Target]:
    """The usable traffic targets of a WorkflowRun status (weight > 0 and some endpoint)."""
    traffic = status.get("traffic") if isinstance(status, dict) else None
    out: list[Target] = []
    for entry in traffic or []:
        if not isinstance(entry, dict):
            continue
        weight = entry.get("weight")
        endpoints = tuple(str(e).rstrip("/") for e in entry.get("endpoints") or [] if e)
        if not isinstance(weight, int) or weight <= 0 or not endpoints:
            continue
        out.append(
            Target(
                revision=int(entry.get("revision") or 0),
                digest=str(entry.get("digest") or ""),
                weight=weight,
                endpoints=endpoints,
            )
        )
    return out


class Balancer:
    """Weighted revision choice and least-in-flight endpoint choice."""

    def __init__(self, *, rng: random.Random | None = None) -> None:
        self.in_flight: dict[str, int] = {}
        self._rng = rng or random.Random()
        self._turn = itertools.count()

    def pick_target(self, targets: Sequence[Target]) -> Target | None:
        if not targets:
            return None
        return self._rng.choices(list(targets), weights=[t.weight for t in targets])[0]

    def pick_endpoint(self, endpoints: Sequence[str], *, exclude: str = "") -> str | None:
        """The endpoint with the fewest calls in flight; ties go round robin."""
        candidates = [e for e in endpoints if e != exclude]
        if not candidates:
            return None
        fewest = min(self.in_flight.get(e, 0) for e in candidates)
        tied = [e for e in candidates if self.in_flight.get(e, 0) == fewest]
        return tied[next(self._turn) % len(tied)]

    def fallback(self, targets: Sequence[Target], failed: Target, endpoint: str) -> str | None:
        """Another endpoint after `endpoint` failed: the same revision first, then any."""
        same = self.pick_endpoint(failed.endpoints, exclude=endpoint)
        if same is not None:
            return same
        others = [e for t in targets if t is not failed for e in t.endpoints]
        return self.pick_endpoint(others, exclude=endpoint)

    @contextlib.contextmanager
    def track(self, endpoint: str) -> Iterator[None]:
        """Count one call in flight to `endpoint` while the block runs."""
        self.in_flight[endpoint] = self.in_flight.get(endpoint, 0) + 1
        try:
            yield
        finally:
            left = self.in_flight[endpoint] - 1
            if left:
                self.in_flight[endpoint] = left
            else:
                del self.in_flight[endpoint]


def hop_timings(server_timing: Sequence[str], *, apiserver_ms: float) -> dict[str, float]:
    """Milliseconds per hop for the log: the runner's `Server-Timing` entries (`runner`,
    `backend`) and the API server's own time; malformed entries are left out."""
    hops: dict[str, float] = {"apiserver": round(apiserver_ms, 3)}
    for header in server_timing:
        for metric in header.split(","):
            name, *parameters = (part.strip() for part in metric.split(";"))
            for parameter in parameters:
                key, _, value = parameter.partition("=")
                if name and key.strip().lower() == "dur":
                    with contextlib.suppress(ValueError):
                        hops[name] = round(float(value.strip().strip('"')), 3)
    return hops


class Follower(Backlog[dict[str, Any]]):
    """One watcher of a run's log: the entries recorded since it started, not yet taken.

    `push` never blocks and never grows the queue past `capacity`: the entry that would
    is dropped and the follower *ended* (`overflowed`), so a slow client costs at most
    `capacity` entries. `take` answers the queued entries (oldest first), waiting for
    one when none is queued; an ended follower answers what it still holds, then `[]`.
    """

    __slots__ = ("overflowed",)

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.overflowed = False

    def push(self, item: dict[str, Any]) -> bool:
        if self.ended:
            return False
        if not super().push(item):
            self.overflowed = True
            self.end()
            return False
        return True


@dataclass
class InvocationLog:
    """The last `size` invocations per (namespace, name), for at most `runs` runs."""

    size: int = LOG_SIZE
    runs: int = LOGGED_RUNS
    follower_backlog: int = FOLLOWER_BACKLOG
    _entries: OrderedDict[RunKey, deque[dict[str, Any]]] = field(default_factory=OrderedDict)
    _followers: dict[RunKey, set[Follower]] = field(default_factory=dict)

    forward: Forward | None = None
    """Set on one of several workers: hands each recorded entry to the siblings."""
    observe: Forward | None = None
    """Handed every entry received, this worker's and the siblings' (`attainment`)."""

    def record(self, namespace: str, name: str, entry: dict[str, Any]) -> None:
        """Keep an invocation this process served (and forward it to the siblings)."""
        self.receive(namespace, name, entry)
        if self.forward is not None:
            self.forward(namespace, name, entry)

    def receive(self, namespace: str, name: str, entry: dict[str, Any]) -> None:
        """Keep an invocation (a sibling's, or this process's): never forwarded."""
        if self.observe is not None:
            self.observe(namespace, name, entry)
        key = RunKey(namespace, name)
        entries = self._entries.get(key)
        if entries is None:
            entries = self._entries[key] = deque(maxlen=self.size)
            if len(self._entries) > self.runs:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        if not insert_by_time(entries, entry):
            return
        for follower in tuple(self._followers.get(key, ())):
            follower.push(entry)
            if follower.ended:  # fell behind: fed no more, whatever its stream does now
                self._forget(key, follower)

    @contextlib.contextmanager
    def follow(self, namespace: str, name: str) -> Iterator[Follower]:
        """A follower of the entries recorded from now on, until the block ends."""
        key = RunKey(namespace, name)
        follower = Follower(self.follower_backlog)
        self._followers.setdefault(key, set()).add(follower)
        try:
            yield follower
        finally:
            follower.end()
            self._forget(key, follower)

    def _forget(self, key: RunKey, follower: Follower) -> None:
        followers = self._followers.get(key)
        if followers is not None:
            followers.discard(follower)
            if not followers:
                del self._followers[key]

    def followers(self, namespace: str, name: str) -> int:
        """How many watchers the run's log feeds now (for metrics and tests)."""
        return len(self._followers.get(RunKey(namespace, name), ()))

    def entries(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """Oldest first."""
        return list(self._entries.get(RunKey(namespace, name), ()))


@dataclass
class Invoker:
    """The per-app state of the invoke subresource."""

    balancer: Balancer = field(default_factory=Balancer)
    log: InvocationLog = field(default_factory=InvocationLog)
    windows: attainment.Windows = field(default_factory=attainment.Windows)
    """The recent calls of each run, for `status.slo` (fed by the log)."""

    def __post_init__(self) -> None:
        self.log.observe = self.windows.observe
