"""Max-in-flight: kube-apiserver's `WithMaxInFlightLimit`, for one event loop.

At most `max_requests_inflight` read-only requests (verbs get, list, watch — kube's
set, so a non-resource HEAD counts as mutating there too) and
`max_mutating_requests_inflight` others are served at once. A request that finds its
kind full is refused at once with 429 TooManyRequests, `Retry-After: 1` and a
metav1.Status carrying `details.retryAfterSeconds`: client-go retries a 429 only when
`Retry-After` is present, and backs off by it.

Why refuse instead of queueing: one event loop has a fixed throughput, so beyond it
every extra request in flight only lengthens the wait of all the others and holds its
body in memory; a quick 429 keeps admitted requests fast and lets clients spread out.

What is not limited, as in kube:

* long-running requests (`longrunning.LongRunning`): watches, proxies and the
  subresources kinds declare long-running — they are counted apart (`long_running`)
  and never refused;
* a user in `system:masters` finding the limit reached is served anyway, without a
  slot ("so powerful that they should always get an answer");
* health probes (`/healthz`, `/livez`, `/readyz`), which kube's priority and fairness
  puts in its exempt level, so a busy server is never restarted for being busy.

kube answers its 429 with a plain-text body; client-go turns any 429 without a Status
into the message used here. plnt sends that message as a Status, as it does for every
error, so kubectl prints the same words and every client gets a decodable body.

Slots are held by a context manager, so an error or a cancellation (the client went
away) frees them; the event loop is single-threaded, so counts need no lock.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator

from plnt.api import errors
from plnt.apiserver.settings import ServingLimits

RETRY_AFTER_SECONDS = 1
"""kube's constant: clients come back after one second."""

MESSAGE = "the server has received too many requests and has asked us to try again later"

NON_MUTATING_VERBS = frozenset({"get", "list", "watch"})


class RequestKind(enum.StrEnum):
    """The two budgets, named as kube's `request_kind` metric label names them."""

    READ_ONLY = "readOnly"
    MUTATING = "mutating"


def kind_of(verb: str) -> RequestKind:
    return RequestKind.READ_ONLY if verb in NON_MUTATING_VERBS else RequestKind.MUTATING


def too_many_requests() -> errors.TooManyRequests:
    return errors.TooManyRequests(MESSAGE, retry_after_seconds=RETRY_AFTER_SECONDS)


class InFlightLimiter:
    """Counts of requests being served by kind, against their limits (0: no limit)."""

    def __init__(self, *, read_only: int, mutating: int) -> None:
        if read_only < 0 or mutating < 0:
            raise ValueError("in-flight limits must be 0 (no limit) or more")
        self._limits = {RequestKind.READ_ONLY: read_only, RequestKind.MUTATING: mutating}
        self._in_flight = dict.fromkeys(RequestKind, 0)
        self._rejected = dict.fromkeys(RequestKind, 0)
        self._long_running = 0

    @classmethod
    def from_limits(cls, limits: ServingLimits) -> InFlightLimiter:
        return cls(
            read_only=limits.max_requests_inflight,
            mutating=limits.max_mutating_requests_inflight,
        )

    def limit(self, kind: RequestKind) -> int:
        return self._limits[kind]

    def in_flight(self, kind: RequestKind) -> int:
        """Requests of `kind` holding a slot now (unlimited kinds are not tracked)."""
        return self._in_flight[kind]

    def rejected(self, kind: RequestKind) -> int:
        """Requests of `kind` refused with 429 since the start."""
        return self._rejected[kind]

    @property
    def long_running(self) -> int:
        """Long-running requests being served now."""
        return self._long_running

    @contextlib.contextmanager
    def admit(self, kind: RequestKind, *, privileged: bool = False) -> Iterator[None]:
        """Hold a slot of `kind` while the block runs; raise `errors.TooManyRequests` when
        none is free, unless `privileged` (system:masters), which is served slot-less."""
        limit = self._limits[kind]
        if limit == 0:
            yield
            return
        if self._in_flight[kind] >= limit:
            if privileged:
                yield
                return
            self._rejected[kind] += 1
            raise too_many_requests()
        self._in_flight[kind] += 1
        try:
            yield
        finally:
            self._in_flight[kind] -= 1

    @contextlib.contextmanager
    def running_long(self) -> Iterator[None]:
        """Count a long-running request while the block runs (never refused)."""
        self._long_running += 1
        try:
            yield
        finally:
            self._long_running -= 1
