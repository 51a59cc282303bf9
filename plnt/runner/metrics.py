"""Prometheus metrics of one runner app, in a registry of its own.

A registry per app (not the process-global default) lets several runners live in one
process — tests chain two — without their counters colliding or leaking between them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from plnt.api.usage import Usage

ENDPOINTS = ("invoke", "chat", "completion")
"""How a runner is called: POST /invoke, or the OpenAI-compatible /v1/chat/completions and
/v1/completions."""
OUTCOMES = ("ok", "error", "cancelled")
"""Outcomes of `plnt_runner_invocations_total`."""
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class RunnerMetrics:
    """The runner's counters, histograms and gauges."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.invocations = Counter(
            "plnt_runner_invocations",
            "Workflow invocations, by endpoint and outcome (ok, error, cancelled).",
            ["endpoint", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "plnt_runner_invocation_seconds",
            "Invocation latency, from request body parsed to output evaluated.",
            ["endpoint"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.step_latency = Histogram(
            "plnt_runner_step_seconds",
            "Step latency, by step id, kind and cache result.",
            ["step", "kind", "cache"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.cache_hits = Counter(
            "plnt_runner_cache_hits", "Step cache hits.", registry=self.registry
        )
        self.cache_misses = Counter(
            "plnt_runner_cache_misses", "Step cache misses.", registry=self.registry
        )
        self.errors = Counter(
            "plnt_runner_errors",
            "Failed invocations, by error type.",
            ["type"],
            registry=self.registry,
        )
        self.first_token = Histogram(
            "plnt_runner_time_to_first_token_seconds",
            "Streamed invocations: from the start of the run to the output step's first piece.",
            ["endpoint"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "plnt_runner_in_flight", "Invocations being executed.", registry=self.registry
        )
        self.backend_latency = Histogram(
            "plnt_runner_backend_request_duration_seconds",
            "One call of a step to what it calls (a model backend's chat completion, an http "
            "step's URL) in seconds, each attempt on its own, by step kind and outcome (ok, "
            "error: a refusal, a failed connection, a timeout).",
            ["kind", "outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "plnt_runner_tokens",
            "Tokens model calls used, by type (prompt, completion): as the backend reported "
            "them or, for streams that carry none, as the runner counted them.",
            ["type"],
            registry=self.registry,
        )
        self.backend_calls = Counter(
            "plnt_runner_backend_calls",
            "Calls sent to a model backend (each attempt), by backend.",
            ["backend"],
            registry=self.registry,
        )
        self.shed = Counter(
            "plnt_runner_shed_calls",
            "Calls a backend's admission refused or whose deadline ended before they were "
            "sent, by backend, criticality and reason (queue: full, or waited its longest; "
            "breaker_open; deadline).",
            ["backend", "criticality", "reason"],
            registry=self.registry,
        )
        self.retries = Counter(
            "plnt_runner_backend_retries",
            "Retries of failed backend calls, by backend and outcome (sent, or refused: the "
            "retry budget was spent and the error passed through).",
            ["backend", "outcome"],
            registry=self.registry,
        )
        self.fallback_calls = Counter(
            "plnt_runner_fallback_calls",
            "Calls the fallback backend served, by primary and fallback.",
            ["backend", "fallback"],
            registry=self.registry,
        )
        self.breaker_state = Gauge(
            "plnt_runner_breaker_state",
            "A backend's circuit breaker: 0 closed, 1 half-open, 2 open.",
            ["backend"],
            registry=self.registry,
        )
        self.backend_queue = Gauge(
            "plnt_runner_backend_queue",
            "Calls waiting for one of a backend's slots.",
            ["backend"],
            registry=self.registry,
        )
        for endpoint in ENDPOINTS:  # known label values exist from the start, at 0
            for outcome in OUTCOMES:
                self.invocations.labels(endpoint, outcome)
            self.latency.labels(endpoint)
            self.first_token.labels(endpoint)
        for kind in ("model", "http"):
            for outcome in ("ok", "error"):
                self.backend_latency.labels(kind, outcome)
        for kind in ("prompt", "completion"):
            self.tokens.labels(kind)

    def count_tokens(self, usage: Usage | None) -> None:
        """Add what one backend reply used (nothing when it is not known)."""
        if usage is not None:
            self.tokens.labels("prompt").inc(usage.prompt_tokens)
            self.tokens.labels("completion").inc(usage.completion_tokens)
