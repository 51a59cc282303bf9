"""One invocation's state while the executor walks it, and what it hands back.

`StepTrace` is one step's record (times, attempts, cache outcome, why it was skipped, a
tool loop's turns, a map's elements, a called workflow's steps) and its wire form
(`plnt.api.traces`). `Execution` is the result of one invocation. `Invocation` is the
state the executor's modules share while one call runs — outputs, traces, the backend
intervals, cache counts, usage, the listeners — kept apart from the `Executor`, which is
shared by every call to one workflow. No I/O here.

Usage: the tokens of each model call are summed as the backend reported them or, where it
streams without them, as the backend client counted them (`plnt.runner.counting`). The sum
is None when any call's usage is unknown — never estimated.

Fallback: a model call the fallback backend answered (`backends.Reply.served_by`) is noted
with the backend's name, whether a plain model step or a tool loop's turn made it, so the
answer can say so and the step's result is not kept in the step cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from plnt.api import traces
from plnt.api.headers import CacheMode, StepCacheOutcome
from plnt.api.usage import Usage
from plnt.runner import agents, backends, checkpointing, errors

StepListener = Callable[["StepTrace", "errors.RunnerError | None"], None]
"""Told of each step that finishes: `None` on success, else the step's error."""
DeltaListener = Callable[[str, str], None]
"""Told of each piece of the output step's reply: `(step id, text)`."""


@dataclass
class StepTrace:
    """What happened to one step in one invocation."""

    id: str
    kind: str
    started_ms: float = 0.0
    finished_ms: float = 0.0
    backend_ms: float = 0.0
    attempts: int = 0
    cache: StepCacheOutcome = StepCacheOutcome.OFF
    resumed: bool = False
    """Finished by an earlier attempt of the invocation (`completed`): not run here."""
    output: Any = field(default=None, repr=False, compare=False)
    """The step's output once it finished (for step lines that carry it; not in `to_json`)."""
    skipped: str | None = None
    """Why the step did not run (its `when` was false); None when it ran."""
    turns: list[agents.TurnTrace] | None = None
    """A tool loop's turns, over every attempt (None: the step has no tools)."""
    items: int | None = None
    """How many elements a `forEach` step mapped over (None: it has no `forEach`)."""
    failed_items: list[traces.FailedItem] = field(default_factory=list)
    """The elements that failed in a `continueOnError` map: `{index, error}`."""
    steps: list[StepTrace] | None = None
    """A workflow step's called workflow's trace (None: the step calls none)."""

    def to_json(self) -> traces.StepEntry:
        """The trace entry as the API returns it (`plnt.api.traces`)."""
        entry: traces.StepEntry = {
            "id": self.id,
            "kind": self.kind,
            "startedMs": round(self.started_ms, 3),
            "finishedMs": round(self.finished_ms, 3),
            "durationMs": round(self.finished_ms - self.started_ms, 3),
            "backendMs": round(self.backend_ms, 3),
            "attempts": self.attempts,
            "cache": str(self.cache),
        }
        if self.resumed:
            entry["resumed"] = True
        if self.skipped is not None:
            entry["skipped"] = self.skipped
        if self.turns is not None:
            entry["turns"] = [turn.to_json() for turn in self.turns]
            calls = [call for turn in self.turns for call in turn.tool_calls]
            entry["toolCalls"] = len(calls)
            entry["invalidToolCalls"] = sum(call.invalid for call in calls)
        if self.items is not None:
            entry["items"] = self.items
            entry["failedItems"] = list(self.failed_items)
        if self.steps is not None:
            entry["steps"] = [step.to_json() for step in self.steps]
        return entry


@dataclass
class Execution:
    """The result of one invocation."""

    output: Any
    trace: list[StepTrace]
    cache_hits: int
    cache_misses: int
    total_ms: float
    backend_ms: float
    usage: Usage | None = None
    first_token_ms: float | None = None
    cache_bypassed: int = 0
    """Steps with the cache enabled that ran without it, because the call asked."""
    fallback: str | None = None
    """The fallback backend that answered at least one model call (None: none did)."""
    intervals: list[tuple[float, float]] = field(default_factory=list, repr=False)
    """Every backend and HTTP call's (start, end), in `perf_counter` seconds."""
    calls_without_usage: int = 0
    """Model calls whose tokens are unknown (then `usage` is None)."""

    @property
    def runner_ms(self) -> float:
        """Time not spent waiting on a backend or HTTP target."""
        return max(self.total_ms - self.backend_ms, 0.0)


@dataclass
class Invocation:
    """One call's state, shared by the executor's modules while it runs."""

    inputs: dict[str, Any]
    started: float
    outputs: dict[str, Any] = field(default_factory=dict)
    traces: dict[str, StepTrace] = field(default_factory=dict)
    intervals: list[tuple[float, float]] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    bypassed: int = 0
    cache_mode: CacheMode = CacheMode.USE
    on_step: StepListener | None = None
    on_delta: DeltaListener | None = None
    usage: Usage | None = None
    calls_without_usage: int = 0
    first_token_ms: float | None = None
    skipped: set[str] = field(default_factory=set)
    """Steps whose `when` was false: their dependants see `steps.ID.skipped`."""
    checkpoint: checkpointing.Checkpoint = checkpointing.NONE
    fallback: str | None = None
    fallback_replies: int = 0
    """Model calls the fallback answered: a step that used one is not cached, so the
    primary's cache entry never holds the fallback's answer."""

    def offset_ms(self, moment: float) -> float:
        """Milliseconds since the invocation began, of a `time.perf_counter()` moment."""
        return (moment - self.started) * 1000.0

    def count(self, reply: backends.Reply) -> None:
        """Add one model call's reported tokens (or note that it reported none)."""
        if reply.usage is None:
            self.calls_without_usage += 1
        else:
            self.add_usage(reply.usage)

    def served(self, reply: backends.Reply) -> None:
        """Note the fallback backend when it answered a model call."""
        if reply.served_by is not None:
            self.fell_back(reply.served_by)

    def fell_back(self, backend: str) -> None:
        """Note that the fallback `backend` answered (a model call, or in a called workflow)."""
        self.fallback = backend
        self.fallback_replies += 1

    def add_usage(self, usage: Usage) -> None:
        self.usage = usage if self.usage is None else self.usage + usage

    def waited(self, began: float, ended: float, trace: StepTrace) -> None:
        """Note time spent waiting on a backend, a tool or an HTTP target for `trace`'s step."""
        self.intervals.append((began, ended))
        trace.backend_ms += (ended - began) * 1000.0

    def delta(self, step: str, piece: str) -> None:
        """Pass one piece of the output step on; the first one times the first token."""
        if self.on_delta is None or not piece:
            return
        if self.first_token_ms is None:
            self.first_token_ms = self.offset_ms(time.perf_counter())
        self.on_delta(step, piece)

    def total_usage(self) -> Usage | None:
        return None if self.calls_without_usage else self.usage


def union_ms(intervals: Sequence[tuple[float, float]]) -> float:
    """Total length (ms) covered by possibly overlapping (start, end) intervals in seconds."""
    total = 0.0
    current_start = current_end = None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total * 1000.0


def first_failure(group: BaseExceptionGroup[BaseException]) -> errors.RunnerError | None:
    """The first `RunnerError` among a task group's failures (nested groups included): the
    failure a caller is told of; the others are the tasks it cancelled."""
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            found = first_failure(error)
            if found is not None:
                return found
        elif isinstance(error, errors.RunnerError):
            return error
    return None
