"""Where an invocation goes, and what happened to the recent ones.

The saga publishes, in `status.traffic`, the revisions that take invocations with their
weights and the base URLs of their ready runners. `Balancer` turns that into one choice
per call: a revision at random in proportion to its weight (revisions with weight 0 or
no endpoints never), then, among its endpoints, the one with the fewest invocations in
flight from this API server (ties broken round robin, so an idle pool is still spread).
In-flight counts are per process: each API server replica balances its own calls.

`InvocationLog` keeps the last `size` invocations of each run in memory, for
`GET …/invocations`; it is per process and lost on restart, like an access log. A
watch of the log (`?watch=true`) is a `follow` queue that `record` feeds.

No I/O here; errors: none.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections import OrderedDict, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

LOG_SIZE = 100
LOGGED_RUNS = 10_000


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


def cache_outcome(body: Any) -> str:
    """`hit`, `miss`, `partial` or `off` from a runner answer's `cache.hits/misses`."""
    cache = body.get("cache") if isinstance(body, dict) else None
    if not isinstance(cache, dict):
        return "off"
    hits, misses = cache.get("hits"), cache.get("misses")
    if not isinstance(hits, int) or not isinstance(misses, int) or hits + misses == 0:
        return "off"
    if misses == 0:
        return "hit"
    return "miss" if hits == 0 else "partial"


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


@dataclass
class InvocationLog:
    """The last `size` invocations per (namespace, name), for at most `runs` runs."""

    size: int = LOG_SIZE
    runs: int = LOGGED_RUNS
    _entries: OrderedDict[tuple[str, str], deque[dict[str, Any]]] = field(
        default_factory=OrderedDict
    )
    _followers: dict[tuple[str, str], set[asyncio.Queue[dict[str, Any]]]] = field(
        default_factory=dict
    )

    def record(self, namespace: str, name: str, entry: dict[str, Any]) -> None:
        key = (namespace, name)
        entries = self._entries.get(key)
        if entries is None:
            entries = self._entries[key] = deque(maxlen=self.size)
            if len(self._entries) > self.runs:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        entries.append(entry)
        for queue in self._followers.get(key, ()):
            queue.put_nowait(entry)

    @contextlib.contextmanager
    def follow(self, namespace: str, name: str) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of the entries recorded from now on, until the block ends."""
        key = (namespace, name)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._followers.setdefault(key, set()).add(queue)
        try:
            yield queue
        finally:
            followers = self._followers.get(key)
            if followers is not None:
                followers.discard(queue)
                if not followers:
                    del self._followers[key]

    def entries(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """Oldest first."""
        return list(self._entries.get((namespace, name), ()))


@dataclass
class Invoker:
    """The per-app state of the invoke subresource."""

    balancer: Balancer = field(default_factory=Balancer)
    log: InvocationLog = field(default_factory=InvocationLog)
