"""What every call through the API server's `invoke` and `proxy` felt, as Prometheus series.

Per run and revision (`namespace`, `workflowrun`, `revision`): the end-to-end time of
every call, the time to first token and the time between output tokens of streamed ones
(each gap on its own, and each call's mean as the `timePerOutputToken` objective reads
it), the calls by outcome, the tokens they used. These are the series the chart's
recording rules read (`charts/plnt/templates/prometheusrules.yaml`), and what a dashboard
shows; each call is also counted good or bad against each per-call objective of its run
(`plnt_workflowrun_slo_calls_total`), which the burn-rate alerts divide, so an objective
between two buckets is still exact; `status.slo` is judged from the same calls, kept in a window
(`attainment`).

Buckets: the latency ones span a cached answer (5 ms) to a long generation (2 min); the
token ones a fast GPU's millisecond per token to a CPU's two seconds.

No I/O here; errors: none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from plnt.api import slo

LATENCY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 10, 15, 20, 30, 60, 120,
)  # fmt: skip
FIRST_TOKEN_BUCKETS = (
    0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 10, 20, 30,
)  # fmt: skip
TOKEN_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
    0.5, 1, 2,
)  # fmt: skip
LABELS = ("namespace", "workflowrun", "revision")
OUTCOMES = ("ok", "error", "cancelled")
CLIENT_CLOSED = 499


def outcome_of(status: int) -> str:
    """`error` for what the service failed (5xx), `cancelled` for a caller that went away
    first, `ok` otherwise (a 4xx is the caller's mistake, answered as it should be)."""
    if status == CLIENT_CLOSED:
        return "cancelled"
    return "error" if status >= 500 else "ok"


class RunLatency:
    """The histograms and counters of calls per run and revision, in the server's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.duration = Histogram(
            "plnt_workflowrun_request_duration_seconds",
            "End-to-end time of a call through invoke or proxy, streamed or not, by run and "
            "revision (calls the caller abandoned excluded).",
            LABELS,
            buckets=LATENCY_BUCKETS,
            registry=None,
        )
        self.first_token = Histogram(
            "plnt_workflowrun_time_to_first_token_seconds",
            "Streamed calls: from the call reaching the API server to its first output token.",
            LABELS,
            buckets=FIRST_TOKEN_BUCKETS,
            registry=None,
        )
        self.inter_token = Histogram(
            "plnt_workflowrun_inter_token_seconds",
            "Streamed calls: time between successive output tokens, each gap observed.",
            LABELS,
            buckets=TOKEN_BUCKETS,
            registry=None,
        )
        self.per_token = Histogram(
            "plnt_workflowrun_time_per_output_token_seconds",
            "Streamed calls: each call's mean time per output token after the first.",
            LABELS,
            buckets=TOKEN_BUCKETS,
            registry=None,
        )
        self.calls = Counter(
            "plnt_workflowrun_requests",
            "Calls through invoke or proxy by outcome: ok, error (5xx), cancelled (caller gone).",
            [*LABELS, "outcome"],
            registry=None,
        )
        self.tokens = Counter(
            "plnt_workflowrun_tokens",
            "Tokens the calls used, by type (prompt, completion), as their usage reported.",
            [*LABELS, "type"],
            registry=None,
        )
        self.slo_calls = Counter(
            "plnt_workflowrun_slo_calls",
            "Calls judged against each of their run's per-call objectives (spec.slo), by "
            "result: good (met it) or bad (missed it, or failed); the burn rates' numerator.",
            [*LABELS, "objective", "result"],
            registry=None,
        )
        self.objectives: Callable[[str, str], slo.ServiceLevelObjectives | None] | None = None
        """The run's objectives, when a follower of runs knows them (`slostatus`)."""
        self._collectors = (
            self.slo_calls,
            self.duration,
            self.first_token,
            self.inter_token,
            self.per_token,
            self.calls,
            self.tokens,
        )

    def register(self) -> None:
        for collector in self._collectors:
            self.registry.register(collector)

    def unregister(self) -> None:
        for collector in self._collectors:
            self.registry.unregister(collector)

    def observe(
        self,
        namespace: str,
        name: str,
        entry: Mapping[str, Any],
        *,
        gaps: Sequence[float] = (),
    ) -> None:
        """Record one call from its invocation-log entry and its token gaps (seconds)."""
        labels = (namespace, name, str(entry.get("revision", "")))
        outcome = outcome_of(int(entry.get("status") or 0))
        self.calls.labels(*labels, outcome).inc()
        if outcome == "cancelled":
            return
        if self.objectives is not None and (objectives := self.objectives(namespace, name)):
            for objective, good in judged_call(objectives, entry, error=outcome == "error"):
                self.slo_calls.labels(*labels, objective, "good" if good else "bad").inc()
        self.duration.labels(*labels).observe(float(entry.get("durationMs") or 0.0) / 1000.0)
        if (first := entry.get("timeToFirstTokenMs")) is not None:
            self.first_token.labels(*labels).observe(float(first) / 1000.0)
        if (per_token := entry.get("timePerOutputTokenMs")) is not None:
            self.per_token.labels(*labels).observe(float(per_token) / 1000.0)
        if gaps:
            histogram = self.inter_token.labels(*labels)
            for gap in gaps:
                histogram.observe(gap)
        usage = entry.get("usage")
        if isinstance(usage, Mapping):
            for kind, field in (("prompt", "promptTokens"), ("completion", "completionTokens")):
                if isinstance(count := usage.get(field), int) and count > 0:
                    self.tokens.labels(*labels, kind).inc(count)


def judged_call(
    objectives: slo.ServiceLevelObjectives, entry: Mapping[str, Any], *, error: bool
) -> list[tuple[str, bool]]:
    """Each per-call objective this call can be judged on, and whether it met it. A failed
    call is bad for every objective: a caller waiting on an error was not served in time.
    An objective the call says nothing about (a first token of a call that was not
    streamed) is left out."""
    judged: list[tuple[str, bool]] = []
    for name, objective, field in (
        ("timeToFirstToken", objectives.time_to_first_token, "timeToFirstTokenMs"),
        ("timePerOutputToken", objectives.time_per_output_token, "timePerOutputTokenMs"),
        ("latency", objectives.latency, "durationMs"),
    ):
        value = entry.get(field)
        if objective is None or (not isinstance(value, int | float) and not error):
            continue
        met = not error and isinstance(value, int | float) and value <= objective.milliseconds
        judged.append((name, met))
    if objectives.max_error_rate is not None:
        judged.append(("errorRate", not error))
    return judged
