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

A call's deadline and criticality travel as headers too. `TIMEOUT_HEADER` carries the
milliseconds the call has left when it is sent: a caller may send it (or `?timeout=` on
`…/invoke` and `…/proxy/…`), the API server sends what is left of the caller's timeout, else
of the run's default, to the runner, and the runner sends what is left of it to the backend
(another runner reads it the same way). Each hop subtracts its own time, so no clocks need to
agree. `CRITICALITY_HEADER` says how much a call matters under overload (`Criticality`):
sheddable calls are refused first and critical ones keep their share. An answer that a
fallback backend produced carries `FALLBACK_HEADER` (the fallback's name).

No I/O here, and no pydantic: the CLI imports this at start-up.
"""

from __future__ import annotations

import math
import re
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

TIMEOUT_HEADER = "X-Plnt-Timeout-Ms"
"""The milliseconds a call has left when it is sent (a number; each hop sends what is left)."""

CRITICALITY_HEADER = "X-Plnt-Criticality"
"""How much one call matters under overload: a `Criticality` value."""

FALLBACK_HEADER = "X-Plnt-Fallback"
"""On an answer: the fallback backend that served part of it (absent: the primary did)."""

RETRY_AFTER = "Retry-After"
"""HTTP's header on a shed call's answer: when trying again may succeed (seconds)."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


class InvalidTimeout(ValueError):
    """A timeout that is not a positive duration; the message names what was given."""


def parse_timeout(value: str) -> float:
    """Seconds from a caller's `timeout`: `2.5` (seconds), `2500ms`, `2s` or `1m`.

    kube's own `timeout` query parameter is a Go duration; these are the forms of it a
    caller writes for one call. Zero, negative and non-finite values are refused: a call
    with no time at all would be refused anyway, and saying so names the parameter.
    """
    match = _DURATION.match(value)
    if match is None:
        raise InvalidTimeout(f"{value!r} is not a duration (e.g. 2.5, 2500ms, 2s, 1m)")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidTimeout(f"{value!r} is not a positive duration")
    return seconds


def parse_time_left_ms(value: str) -> float:
    """Seconds from a `TIMEOUT_HEADER` value (milliseconds, possibly fractional; 0 or less
    means the time is already up and is kept as 0)."""
    problem = f"{TIMEOUT_HEADER} {value!r} is not a number of milliseconds"
    try:
        milliseconds = float(value)
    except ValueError as error:
        raise InvalidTimeout(problem) from error
    if not math.isfinite(milliseconds):
        raise InvalidTimeout(problem)
    return max(milliseconds, 0.0) / 1000.0


class Criticality(StrEnum):
    """How much a call matters when there is not room for every call.

    Ordered: `critical` calls are admitted first and may take a queued place from a lesser
    call; `sheddable` calls are the first refused (they queue only while the queue is less
    than half full). `standard` is the default.
    """

    CRITICAL = "critical"
    STANDARD = "standard"
    SHEDDABLE = "sheddable"

    @property
    def rank(self) -> int:
        """0 for critical, 1 standard, 2 sheddable: lower goes first."""
        return _RANKS[self]

    @classmethod
    def of_header(cls, value: str | None, default: Criticality | None = None) -> Criticality:
        """From a request's `CRITICALITY_HEADER`; `default` (else standard) when absent.
        Raises ValueError naming the header for a value that is not one of the three."""
        if value is None or not value.strip():
            return default if default is not None else cls.STANDARD
        try:
            return cls(value.strip().lower())
        except ValueError as error:
            allowed = ", ".join(member.value for member in cls)
            raise ValueError(f"{CRITICALITY_HEADER} {value!r} is not one of {allowed}") from error


_RANKS = {Criticality.CRITICAL: 0, Criticality.STANDARD: 1, Criticality.SHEDDABLE: 2}


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
