"""A retry budget per backend: retries may be at most a set share of the calls made over
a sliding window, plus a small floor.

Why a budget and not only a retry count per call: under overload every call fails, and a
per-call count multiplies the load by the attempts just when the backend has least room —
the retry storm. A budget caps the extra load at `ratio` of the traffic (10% by default)
whatever happens, while a backend that fails now and then still gets every failed call
retried. The floor lets a quiet backend retry at all (with 2 calls in the window, 10% is
none). gRPC's retry throttling and Finagle's `RetryBudget` work this way.

Calls and retries are counted per whole second over the window, so memory is bounded by
the window's length whatever the rate. No I/O; the clock is injectable for tests.
"""

from __future__ import annotations

import collections
import math
import time
from dataclasses import dataclass

from plnt.runner.deadlines import Clock


@dataclass(frozen=True)
class BudgetPolicy:
    """`ratio` of the window's calls may be retried, plus `floor` retries per window."""

    ratio: float = 0.1
    floor: int = 3
    window_seconds: float = 10.0


class RetryBudget:
    """Counts one backend's calls and retries; says whether one more retry fits."""

    def __init__(self, policy: BudgetPolicy | None = None, *, clock: Clock = time.monotonic):
        self.policy = policy if policy is not None else BudgetPolicy()
        self._clock = clock
        self._calls: collections.deque[list[int]] = collections.deque()  # [second, calls]
        self._retries: collections.deque[list[int]] = collections.deque()
        self.refused = 0
        """Retries refused because the budget was spent (passed through as the error)."""

    def _bucket(self, buckets: collections.deque[list[int]]) -> list[int]:
        second = math.floor(self._clock())
        oldest = second - math.ceil(self.policy.window_seconds)
        while buckets and buckets[0][0] <= oldest:
            buckets.popleft()
        if not buckets or buckets[-1][0] != second:
            buckets.append([second, 0])
        return buckets[-1]

    @staticmethod
    def _sum(buckets: collections.deque[list[int]]) -> int:
        return sum(count for _, count in buckets)

    def called(self) -> None:
        """Count one first attempt of a call."""
        self._bucket(self._calls)[1] += 1

    def try_retry(self) -> bool:
        """Spend one retry if the budget has room (and count it); False when spent."""
        self._bucket(self._calls)  # drops the seconds that left the window
        calls = self._sum(self._calls)
        retries = self._bucket(self._retries)
        allowed = self.policy.floor + self.policy.ratio * calls
        if self._sum(self._retries) + 1 > allowed:
            self.refused += 1
            return False
        retries[1] += 1
        return True
