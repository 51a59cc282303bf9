"""Shadow traffic: live invocations the stable answered, mirrored to the canary under analysis.

The saga opens a *window* by writing `shadow: {percent, queueSize, since}` into the
canary's `status.traffic` entry while the canary is analysed, and closes it by removing
the entry (promotion, rollback). While it is open, an invocation (`…/invoke`,
`…/proxy/invoke`, plain or streamed) that was routed to another revision and answered 200
is, after its caller's answer is complete, *offered* here: a sampled `percent` of them is
queued, the rest ignored. Nothing of it can slow the caller: `offer` never blocks and
does no I/O, and a run that already holds `queueSize` mirrored calls (queued or in
flight) has the new one dropped and counted (the `plnt_apiserver_shadow_dropped`
counter, and `dropped` in the read path's answer).

A small pool of background tasks (`mirroring.context`, a cleanup context: started with
the app, cancelled before the runner session closes) sends each mirrored call to a canary endpoint's
`POST /invoke` (not streamed: only the answer is compared; with `Cache-Control: no-cache`,
so the canary's steps run rather than answer from its cache), logs it in the invocation log
with `"shadow": true`, and keeps the pair (inputs, the stable's answer, the canary's) in the
`ShadowLog`: the last `PAIRS_KEPT` per run, in memory, per process. `GET
…/workflowruns/NAME/shadow?revision=N` answers them (`mirroring.handle_shadow`). The
worker processes of one server (`--workers`) share their pairs and drops
(`ShadowLog.forward` and `receive`, wired by `sharing`), so one read answers the whole
server's; with several API server replicas each holds its own pairs, and the reader
collects distinct ids over repeated reads.

This module holds the window, the queue and the pairs, and does no I/O; the sending and
the read path are `mirroring`'s (which reads them through this package's `keys`).

Errors: none raised; a canary that fails or cannot be reached is a pair with its error.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from plnt.api import shadows as wire
from plnt.api.runs import RunKey
from plnt.apiserver.workflowruns.traffic import Forward, insert_by_time

SHADOW_RUNS = 10_000
"""Runs whose pairs are kept (least recently recorded dropped)."""


@dataclass(frozen=True, slots=True)
class Window:
    """The canary under shadow: its revision, endpoints and the window's settings."""

    revision: int
    endpoints: tuple[str, ...]
    percent: int
    queue_size: int


def window_of(status: Any) -> Window | None:
    """The open shadow window of a WorkflowRun status, if a traffic entry has one."""
    traffic = status.get("traffic") if isinstance(status, dict) else None
    for entry in traffic or []:
        shadow = entry.get("shadow") if isinstance(entry, dict) else None
        if not isinstance(shadow, dict):
            continue
        endpoints = tuple(str(e).rstrip("/") for e in entry.get("endpoints") or [] if e)
        percent = shadow.get("percent")
        if not endpoints or not isinstance(percent, int) or percent <= 0:
            return None
        size = shadow.get("queueSize")
        return Window(
            revision=int(entry.get("revision") or 0),
            endpoints=endpoints,
            percent=min(percent, 100),
            queue_size=size if isinstance(size, int) and size > 0 else wire.DEFAULT_QUEUE_SIZE,
        )
    return None


@dataclass(frozen=True, slots=True)
class Mirror:
    """One live invocation to send to the canary, and what the stable answered to it."""

    namespace: str
    name: str
    window: Window
    body: bytes
    stable_revision: int
    stable_ms: float
    stable_output: Any = None
    stable_body: bytes | None = None
    """A buffered answer's bytes, decoded by the worker (not on the caller's path)."""


@dataclass
class _Pairs:
    pairs: deque[dict[str, Any]]
    dropped: dict[int, int] = field(default_factory=dict)


@dataclass
class ShadowLog:
    """The last `size` pairs per run and the calls dropped per canary revision."""

    size: int = wire.PAIRS_KEPT
    runs: int = SHADOW_RUNS
    _runs: OrderedDict[RunKey, _Pairs] = field(default_factory=OrderedDict)

    def _of(self, namespace: str, name: str) -> _Pairs:
        key = RunKey(namespace, name)
        found = self._runs.get(key)
        if found is None:
            found = self._runs[key] = _Pairs(deque(maxlen=self.size))
            if len(self._runs) > self.runs:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(key)
        return found

    forward: Forward | None = None
    """Set on one of several workers: hands each pair and drop to the siblings."""

    def record(self, namespace: str, name: str, pair: dict[str, Any]) -> None:
        self.receive(namespace, name, {"pair": pair})
        if self.forward is not None:
            self.forward(namespace, name, {"pair": pair})

    def drop(self, namespace: str, name: str, revision: int) -> None:
        self.receive(namespace, name, {"dropped": revision})
        if self.forward is not None:
            self.forward(namespace, name, {"dropped": revision})

    def receive(self, namespace: str, name: str, item: dict[str, Any]) -> None:
        """Keep a pair (`{"pair": …}`) or count a drop (`{"dropped": revision}`), this
        process's or a sibling's: never forwarded."""
        found = self._of(namespace, name)
        pair = item.get("pair")
        if isinstance(pair, dict):
            insert_by_time(found.pairs, pair)
        revision = item.get("dropped")
        if isinstance(revision, int):
            found.dropped[revision] = found.dropped.get(revision, 0) + 1

    def pairs(self, namespace: str, name: str, revision: int | None = None) -> list[dict[str, Any]]:
        """Oldest first; only those whose canary was `revision` when one is given."""
        found = self._runs.get(RunKey(namespace, name))
        if found is None:
            return []
        return [p for p in found.pairs if revision is None or p["canary"]["revision"] == revision]

    def dropped(self, namespace: str, name: str, revision: int | None = None) -> int:
        found = self._runs.get(RunKey(namespace, name))
        if found is None:
            return 0
        if revision is None:
            return sum(found.dropped.values())
        return found.dropped.get(revision, 0)


class Shadower:
    """Sampling and the bounded queue of mirrored calls (no I/O here: `context` sends)."""

    def __init__(
        self,
        *,
        rng: random.Random | None = None,
        on_drop: Callable[[], None] | None = None,
        log: ShadowLog | None = None,
    ) -> None:
        self._rng = rng or random.Random()
        self._on_drop = on_drop
        self.log = log or ShadowLog()
        self.queue: asyncio.Queue[Mirror] = asyncio.Queue()
        self.held: dict[RunKey, int] = {}
        """Mirrored calls per run queued or in flight; at most the window's queueSize."""

    def sampled(self, window: Window) -> bool:
        """Whether one call is in the window's sampled share."""
        return window.percent >= 100 or self._rng.random() * 100.0 < window.percent

    def offer(self, mirror: Mirror) -> bool:
        """Queue `mirror`, or drop and count it when its run holds `queueSize` already."""
        key = RunKey(mirror.namespace, mirror.name)
        held = self.held.get(key, 0)
        if held >= mirror.window.queue_size:
            self.log.drop(mirror.namespace, mirror.name, mirror.window.revision)
            if self._on_drop is not None:
                self._on_drop()
            return False
        self.held[key] = held + 1
        self.queue.put_nowait(mirror)
        return True

    def done(self, mirror: Mirror) -> None:
        """One mirrored call finished (sent, failed, or abandoned at shutdown)."""
        key = RunKey(mirror.namespace, mirror.name)
        left = self.held.get(key, 0) - 1
        if left > 0:
            self.held[key] = left
        else:
            self.held.pop(key, None)
