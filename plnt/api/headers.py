"""The `X-Plnt-*` headers of an invocation's answer, and the cache outcome one carries.

An answer says which revision served it (`REVISION_HEADER`, set by the API server) and
how the runner's step cache did (`CACHE_HEADER`, a `CacheOutcome`): `hit` (every cached
step hit), `miss` (none did), `partial`, or `off` (no cached step ran, or nothing is
known). The runner computes it from its counts (`CacheOutcome.of_counts`); the API server
and the CLI read it from an answer's `cache.hits/misses` when no header carries it
(`CacheOutcome.of_answer`), and the invocation log records it.

No I/O here, and no pydantic: the CLI imports this at start-up.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

REVISION_HEADER = "X-Plnt-Revision"
"""The revision that served an invocation."""

CACHE_HEADER = "X-Plnt-Cache"
"""The invocation's `CacheOutcome` (set by the runner, passed on by the API server)."""


class CacheOutcome(StrEnum):
    """How one invocation's cached steps did."""

    HIT = "hit"
    MISS = "miss"
    PARTIAL = "partial"
    OFF = "off"

    @classmethod
    def of_counts(cls, hits: int, misses: int) -> CacheOutcome:
        """From the invocation's cache hits and misses."""
        if hits + misses == 0:
            return cls.OFF
        if misses == 0:
            return cls.HIT
        return cls.MISS if hits == 0 else cls.PARTIAL

    @classmethod
    def of_answer(cls, body: Any) -> CacheOutcome:
        """From a runner answer's (or a stream's result line's) `cache.hits/misses`;
        `off` when they are missing or not counts."""
        cache = body.get("cache") if isinstance(body, dict) else None
        if not isinstance(cache, dict):
            return cls.OFF
        hits, misses = cache.get("hits"), cache.get("misses")
        if not isinstance(hits, int) or not isinstance(misses, int):
            return cls.OFF
        return cls.of_counts(hits, misses)
