"""A circuit breaker per backend: stop sending calls to a backend that keeps failing, try
it again now and then, and resume when it answers.

States: `closed` (calls pass; `failure_threshold` consecutive failures — errors, or calls
slower than `latency_limit_seconds` — open it), `open` (calls are not sent: the fallback
serves them, or they are refused at once; after `open_seconds` the next call is let
through as a probe), `half_open` (one probe in flight; its success closes the breaker, its
failure opens it again for another `open_seconds`).

Why: a backend that is down makes every call wait for a connection error or a timeout,
holding the caller, a slot and the caller's deadline; an open breaker answers in
microseconds and leaves the backend room to come back. Transitions are kept (`changes`)
so the runner can report them (metrics; docs/reliability.md), and the wall-clock time of
the last one (`since`), which `GET /breakers` reports and the PlntBackend's status shows.
No I/O; injectable clocks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from plnt.runner.deadlines import Clock


class State(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerPolicy:
    """When to open and for how long."""

    failure_threshold: int = 5
    latency_limit_seconds: float | None = None
    open_seconds: float = 5.0


@dataclass(frozen=True)
class Change:
    """One transition, with why."""

    state: State
    reason: str


@dataclass
class Breaker:
    """One backend's breaker (see the module docstring)."""

    policy: BreakerPolicy = field(default_factory=BreakerPolicy)
    clock: Clock = time.monotonic
    wall_clock: Clock = time.time
    state: State = State.CLOSED
    failures: int = 0
    opened_at: float = 0.0
    probing: bool = False
    changes: list[Change] = field(default_factory=list)
    since: float = field(default_factory=time.time)
    """When the breaker entered its state, by `wall_clock` (its creation, while closed)."""

    def allows(self) -> bool:
        """Whether a call may be sent now (an open breaker past its time lets one probe)."""
        if self.state is State.CLOSED:
            return True
        if self.state is State.OPEN and self.clock() - self.opened_at >= self.policy.open_seconds:
            self._move(State.HALF_OPEN, "open time elapsed: one probe call is let through")
        if self.state is State.HALF_OPEN and not self.probing:
            self.probing = True
            return True
        return False

    def succeeded(self, seconds: float) -> None:
        """A call answered, in `seconds`; too slow counts as a failure."""
        limit = self.policy.latency_limit_seconds
        if limit is not None and seconds > limit:
            self.failed(f"a call took {seconds:.3f}s, over the limit of {limit:g}s")
            return
        self.failures = 0
        self.probing = False
        if self.state is not State.CLOSED:
            self._move(State.CLOSED, "a probe call succeeded")

    def failed(self, why: str) -> None:
        """A call failed (the backend's fault, not a refusal of ours)."""
        self.failures += 1
        self.probing = False
        if self.state is State.HALF_OPEN:
            self._open(f"the probe call failed: {why}")
        elif self.state is State.CLOSED and self.failures >= self.policy.failure_threshold:
            self._open(f"{self.failures} consecutive failures, the last: {why}")

    def released(self) -> None:
        """A probe ended with neither success nor failure (cancelled): let another probe."""
        self.probing = False

    def _open(self, reason: str) -> None:
        self.opened_at = self.clock()
        self._move(State.OPEN, reason)

    def _move(self, state: State, reason: str) -> None:
        self.since = self.wall_clock()
        self.state = state
        self.changes.append(Change(state, reason))
