"""The recent calls of every run, kept for judging `spec.slo` on live traffic (`status.slo`).

Fed by the invocation log as it receives each entry (`traffic.InvocationLog.observe`), so
on one of several workers (`--workers`) it holds the siblings' calls too, and whichever
worker judges sees the whole server's traffic. Each run keeps at most `MAX_CALLS` calls,
newest kept, and calls older than the longest window an SLO may have (30 days) are dropped
as new ones come; a run's window is cut from these at judging time. It is memory: a
restarted server judges the calls it has relayed since (the Prometheus series,
`latency`, keep the long view for the alerts).

No I/O here; errors: none.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from plnt.api import slo
from plnt.api.meta import parse_time
from plnt.api.runs import RunKey
from plnt.apiserver.workflowruns.latency import outcome_of

MAX_CALLS = 20_000
MAX_RUNS = 5_000
MAX_AGE_SECONDS = 30 * 86400


@dataclass(frozen=True, slots=True)
class Call:
    """One call as the judges need it."""

    at: float
    """Unix time it ended (the log entry's `time`)."""
    revision: int
    error: bool
    latency_ms: float
    first_token_ms: float | None
    per_token_ms: float | None
    input_tokens: int
    output_tokens: int
    spilled_to: str | None = None
    """The pool's backend that served it instead of the run's own (`spilling`)."""

    def tokens_per_second(self) -> float | None:
        """Output tokens over the time from the first token to the end (the whole call
        when it was not streamed); None without output tokens."""
        if self.output_tokens <= 0:
            return None
        seconds = (self.latency_ms - (self.first_token_ms or 0.0)) / 1000.0
        if self.first_token_ms is not None:
            tokens = self.output_tokens - 1  # the first token is the time to first token's
            return tokens / seconds if seconds > 0 and tokens > 0 else None
        return self.output_tokens / seconds if seconds > 0 else None


def unix_time(stamp: Any) -> float | None:
    """The Unix time of an RFC 3339 stamp on the wire; None when it is not one."""
    if not isinstance(stamp, str):
        return None
    try:
        return parse_time(stamp).timestamp()
    except ValueError:
        return None


def call_of(entry: Mapping[str, Any]) -> Call | None:
    """The call an invocation-log entry describes; None for one the judges leave out (a
    caller that went away, an entry without a time)."""
    status = entry.get("status")
    at = unix_time(entry.get("time"))
    if not isinstance(status, int) or at is None or outcome_of(status) == "cancelled":
        return None
    usage = entry.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    first, per_token = entry.get("timeToFirstTokenMs"), entry.get("timePerOutputTokenMs")
    return Call(
        at=at,
        revision=int(entry.get("revision") or 0),
        error=outcome_of(status) == "error",
        latency_ms=float(entry.get("durationMs") or 0.0),
        first_token_ms=float(first) if isinstance(first, int | float) else None,
        per_token_ms=float(per_token) if isinstance(per_token, int | float) else None,
        input_tokens=int(usage.get("promptTokens") or 0),
        output_tokens=int(usage.get("completionTokens") or 0),
        spilled_to=spilled if isinstance(spilled := entry.get("spilledTo"), str) else None,
    )


def samples_of(calls: list[Call], *, since: float, until: float) -> slo.Samples:
    """The judges' view of the calls that ended in [since, until]."""
    samples = slo.Samples()
    first_at: float | None = None
    for call in calls:
        if not since <= call.at <= until:
            continue
        first_at = call.at if first_at is None else min(first_at, call.at)
        samples.calls += 1
        samples.errors += call.error
        samples.input_tokens += call.input_tokens
        samples.output_tokens += call.output_tokens
        if call.error:
            continue  # a failed call's timings say how it failed, not how fast it served
        samples.latency_ms.append(call.latency_ms)
        if call.first_token_ms is not None:
            samples.first_token_ms.append(call.first_token_ms)
        if call.per_token_ms is not None:
            samples.per_token_ms.append(call.per_token_ms)
        if (rate := call.tokens_per_second()) is not None:
            samples.tokens_per_second.append(rate)
    samples.span_seconds = until - first_at if first_at is not None else 0.0
    return samples


@dataclass
class Windows:
    """The recent calls of each run (see the module docstring)."""

    max_calls: int = MAX_CALLS
    max_runs: int = MAX_RUNS
    _runs: OrderedDict[RunKey, deque[Call]] = field(default_factory=OrderedDict)

    def observe(self, namespace: str, name: str, entry: dict[str, Any]) -> None:
        """Take one invocation-log entry (this worker's or a sibling's)."""
        call = call_of(entry)
        if call is None:
            return
        key = RunKey(namespace, name)
        calls = self._runs.get(key)
        if calls is None:
            calls = self._runs[key] = deque(maxlen=self.max_calls)
            if len(self._runs) > self.max_runs:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(key)
        calls.append(call)
        while calls and calls[0].at < call.at - MAX_AGE_SECONDS:
            calls.popleft()

    def calls(self, key: RunKey) -> list[Call]:
        return list(self._runs.get(key, ()))

    def forget(self, key: RunKey) -> None:
        self._runs.pop(key, None)

    def runs(self) -> list[RunKey]:
        return list(self._runs)
