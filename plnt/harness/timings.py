"""Where the time of one invocation went, as the runner and the API server report it.

Two sources, parsed here so the generator stays a loop:

* the `Server-Timing` header (`runner;dur=1.2, backend;dur=0.8, apiserver;dur=0.3`): the
  hops. The runner writes `runner` (its own time, backend calls excluded) and `backend`;
  the API server's invoke subresource adds `apiserver` (its own time, the upstream round
  trip excluded). A streamed answer carries only `apiserver` in the header; the stream's
  last line holds the runner's `timings` (`runnerMs`, `backendMs`), read by `body_hops`.
* the answer's `trace`: one entry per step with `id` and `durationMs`.

Malformed parts are skipped, never fatal: a bench measures what it can read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

HOPS: tuple[str, ...] = ("apiserver", "runner", "backend")
_BODY_HOPS: tuple[tuple[str, str], ...] = (("runner", "runnerMs"), ("backend", "backendMs"))


def server_timing(header: str) -> Iterator[tuple[str, float]]:
    """(name, milliseconds) for each `name;dur=X` entry; entries without a duration skipped."""
    for metric in header.split(","):
        name, _, parameters = metric.partition(";")
        name = name.strip()
        if not name or not parameters:
            continue
        for parameter in parameters.split(";"):
            key, _, value = parameter.partition("=")
            if key.strip().lower() != "dur":
                continue
            duration = _number(value.strip().strip('"'))
            if duration is not None:
                yield name, duration
            break


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def body_hops(timings: Any) -> Iterator[tuple[str, float]]:
    """(hop, milliseconds) from a body's `timings` object (`runnerMs`, `backendMs`)."""
    if not isinstance(timings, Mapping):
        return
    for hop, key in _BODY_HOPS:
        value = timings.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            yield hop, float(value)


def step_durations(trace: Any) -> Iterator[tuple[str, float]]:
    """(step id, milliseconds) for each trace entry with an id and a `durationMs`."""
    if not isinstance(trace, list):
        return
    for entry in trace:
        if not isinstance(entry, Mapping):
            continue
        step, duration = entry.get("id"), entry.get("durationMs")
        if isinstance(step, str) and isinstance(duration, int | float):
            yield step, float(duration)


def agent_counts(trace: Any) -> tuple[int, int] | None:
    """(turns, tool calls) summed over an answer's tool-loop steps; None when it has none."""
    if not isinstance(trace, list):
        return None
    loops = [e for e in trace if isinstance(e, Mapping) and isinstance(e.get("turns"), list)]
    if not loops:
        return None
    turns = sum(len(entry["turns"]) for entry in loops)
    calls = sum(int(entry.get("toolCalls") or 0) for entry in loops)
    return turns, calls


def cache_counts(body: Any) -> tuple[int, int] | None:
    """This invocation's step-cache (hits, misses) from the answer's `cache`, if it has one;
    a step that bypassed the cache (the call asked) is a miss: the cache did not answer it."""
    cache = body.get("cache") if isinstance(body, Mapping) else None
    if not isinstance(cache, Mapping):
        return None
    hits, misses = cache.get("hits"), cache.get("misses")
    bypassed = cache.get("bypassed", 0)
    if isinstance(hits, int) and isinstance(misses, int) and isinstance(bypassed, int):
        return hits, misses + bypassed
    return None


def completion_tokens(body: Any) -> int | None:
    """`usage.completion_tokens` of the answer, if the runner reported usage."""
    usage = body.get("usage") if isinstance(body, Mapping) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    return tokens if isinstance(tokens, int) else None
