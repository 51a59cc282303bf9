"""What a bench run does and where it sends requests.

A `LoadPlan` is the shape of the load (how long, how fast, with which inputs);
an `Endpoint` is one target of it with the URLs its counters are read from.
They are separate because a compare run sends one plan to several endpoints in
the same window, so the endpoints see the same minute of the machine.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class PlanError(ValueError):
    """A load plan that cannot be run as given (both or neither of rate and concurrency...)."""


@dataclass(frozen=True)
class LoadPlan:
    """The load: a warm-up that is run but not recorded, then the measured phase.

    Exactly one of `rate` (open loop: requests are scheduled at fixed intervals
    whatever the server does) and `concurrency` (closed loop: that many
    requests in flight, each starting when the previous one ends) is set. `requests`, when
    set, ends the measured phase after that many requests even if `duration_seconds` has
    not passed (a count-bound run, as the canary analysis's `requests` asks for).
    """

    duration_seconds: float
    warmup_seconds: float = 0.0
    rate: float | None = None
    concurrency: int | None = None
    inputs: Sequence[Any] = ({},)
    timeout_seconds: float = 30.0
    requests: int | None = None

    def __post_init__(self) -> None:
        if (self.rate is None) == (self.concurrency is None):
            raise PlanError("exactly one of rate and concurrency must be set")
        if self.rate is not None and not self.rate > 0:
            raise PlanError(f"rate must be > 0, got {self.rate}")
        if self.concurrency is not None and self.concurrency < 1:
            raise PlanError(f"concurrency must be >= 1, got {self.concurrency}")
        if not self.duration_seconds > 0:
            raise PlanError(f"duration must be > 0 s, got {self.duration_seconds}")
        if self.warmup_seconds < 0:
            raise PlanError(f"warm-up must be >= 0 s, got {self.warmup_seconds}")
        if not self.timeout_seconds > 0:
            raise PlanError(f"timeout must be > 0 s, got {self.timeout_seconds}")
        if self.requests is not None and self.requests < 1:
            raise PlanError(f"requests must be >= 1, got {self.requests}")
        if len(self.inputs) == 0:
            raise PlanError("inputs must name at least one input object")

    @property
    def open_loop(self) -> bool:
        return self.rate is not None


@dataclass(frozen=True)
class Endpoint:
    """Where requests go, and where to read the counters that make the deltas.

    `invoke_url` takes a POST of `{"inputs": ...}`: a runner's `/invoke`, or
    the API server's `…/workflowruns/NAME/invoke?revision=N`. With
    `?stream=true` in it the harness reads NDJSON and measures time to first
    token. `runner_metrics_urls` are the runners' `/metrics` (step-cache
    counters); `backend_metrics_url` a DCGM exporter or vLLM `/metrics`.
    """

    label: str
    invoke_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    runner_metrics_urls: Sequence[str] = ()
    backend_metrics_url: str | None = None
    ssl: ssl.SSLContext | bool | None = None
    cache_of_runners: bool = False
    """The hit rate is the runners' (their counters: every other caller in the window)
    even when these requests bypass the step cache: what the canary analysis judges
    `minCacheHitRate` on. Otherwise requests that bypass it are judged by their answers."""


@dataclass(frozen=True)
class Progress:
    """A running snapshot of one endpoint's measured phase, about once a second."""

    label: str
    elapsed_seconds: float
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float
