"""The `X-Plnt-*` headers of an invocation's answer, the cache outcome one carries, and
how a call asks to bypass the step cache.

An answer says which revision served it (`REVISION_HEADER`, set by the API server) and
how the runner's step cache did (`CACHE_HEADER`, a `CacheOutcome`): `hit` (every cached
step hit), `miss` (none did), `partial`, `bypass` (the call asked not to use the cache,
so every cached step ran) or `off` (no cached step ran, or nothing is known). The runner
computes it from its counts (`CacheOutcome.of_counts`); the API server and the CLI read it
from an answer's `cache.hits/misses/bypassed` when no header carries it
(`CacheOutcome.of_answer`), and the invocation log records it.

A call bypasses the step cache with HTTP's own request header, `Cache-Control: no-cache`
(or `no-store`): the runner then neither reads nor writes the cache for any step of that
call (`CacheMode.of_cache_control`), so the answer is the model's and the cache keeps
what live traffic put there. Why the standard header and not a plnt one: every HTTP
client and the OpenAI SDK (`extra_headers`) can send it, and proxies pass it. The API
server forwards it to the runner; benches, the canary analysis, the quality gate and
shadow comparisons send it (`BYPASS_HEADERS`) because they judge answer times and
answers, which a cache would make its own.

No I/O here, and no pydantic: the CLI imports this at start-up.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

REVISION_HEADER = "X-Plnt-Revision"
"""The revision that served an invocation."""

CACHE_HEADER = "X-Plnt-Cache"
"""The invocation's `CacheOutcome` (set by the runner, passed on by the API server)."""

PROBE_HEADER = "X-Plnt-Probe"
"""Marks a backend probe's own call (`ttft`): a server may leave it out of its counts."""

SPILL_HEADER = "X-Plnt-Spill-To"
"""A call the API server spills to another backend of the run's pool (`spec.slo`): the
backend's name, which the runner obeys only when it was deployed with it, and echoes on
its answer when it did (`plnt.runner.spilling`)."""

CACHE_CONTROL = "Cache-Control"
"""The request header that asks to bypass the step cache (`no-cache` or `no-store`)."""

BYPASS_HEADERS = {CACHE_CONTROL: "no-cache"}
"""What a caller that must measure or judge the model itself sends with each call."""
_BYPASSING = frozenset({"no-cache", "no-store"})


class CacheMode(StrEnum):
    """Whether one call may use the step cache: `use` (the default) or `bypass`."""

    USE = "use"
    BYPASS = "bypass"

    @classmethod
    def of_cache_control(cls, value: str | None) -> CacheMode:
        """From a request's `Cache-Control` (directives are case-insensitive, comma
        separated, may carry `=value`): `bypass` for `no-cache` or `no-store`."""
        if not value:
            return cls.USE
        directives = {part.split("=", 1)[0].strip().lower() for part in value.split(",")}
        return cls.BYPASS if directives & _BYPASSING else cls.USE


class CacheOutcome(StrEnum):
    """How one invocation's cached steps did."""

    HIT = "hit"
    MISS = "miss"
    PARTIAL = "partial"
    BYPASS = "bypass"
    OFF = "off"

    @classmethod
    def of_counts(cls, hits: int, misses: int, bypassed: int = 0) -> CacheOutcome:
        """From the invocation's cache hits, misses and steps that bypassed the cache."""
        if hits + misses == 0:
            return cls.BYPASS if bypassed else cls.OFF
        if misses == 0:
            return cls.HIT
        return cls.MISS if hits == 0 else cls.PARTIAL

    @classmethod
    def of_answer(cls, body: Any) -> CacheOutcome:
        """From a runner answer's (or a stream's result line's) `cache.hits/misses` (and
        `bypassed`, absent from older runners' answers); `off` when they are not counts."""
        cache = body.get("cache") if isinstance(body, dict) else None
        if not isinstance(cache, dict):
            return cls.OFF
        hits, misses = cache.get("hits"), cache.get("misses")
        bypassed = cache.get("bypassed", 0)
        if isinstance(hits, int) and isinstance(misses, int) and isinstance(bypassed, int):
            return cls.of_counts(hits, misses, bypassed)
        return cls.OFF


class StepCacheOutcome(StrEnum):
    """How one step did with the step cache: a trace entry's `cache` (`plnt.runner`'s
    `StepTrace`) and what the CLI prints beside a step.

    The values of `CacheOutcome` that make sense for one step: a step is a hit or a miss
    (or bypassed the cache, or is not cached at all), never `partial`, which is an
    invocation's mix of hits and misses. Its own enum, so a step's type says so; its values
    are `CacheOutcome`'s, so both read the same on the wire.
    """

    HIT = CacheOutcome.HIT.value
    MISS = CacheOutcome.MISS.value
    BYPASS = CacheOutcome.BYPASS.value
    OFF = CacheOutcome.OFF.value
