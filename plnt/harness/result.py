"""What a bench run measured, and its JSON form as stored in `status.lastBench`.

The JSON form uses camelCase keys like every other plnt object, and
`from_json` accepts what `to_json` wrote, so a result read back from status is
the same value (the /bench subresource and the CLI both rely on that).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ERROR_CLASSES: tuple[str, ...] = ("4xx", "5xx", "timeout", "connection")


@dataclass(frozen=True)
class Percentiles:
    """Latency percentiles in milliseconds over `count` samples."""

    count: int
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "p50Ms": self.p50_ms,
            "p90Ms": self.p90_ms,
            "p95Ms": self.p95_ms,
            "p99Ms": self.p99_ms,
            "maxMs": self.max_ms,
            "meanMs": self.mean_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Percentiles:
        return cls(
            count=int(data["count"]),
            p50_ms=float(data["p50Ms"]),
            p90_ms=float(data["p90Ms"]),
            p95_ms=float(data["p95Ms"]),
            p99_ms=float(data["p99Ms"]),
            max_ms=float(data["maxMs"]),
            mean_ms=float(data["meanMs"]),
        )


EMPTY = Percentiles(
    count=0, p50_ms=0.0, p90_ms=0.0, p95_ms=0.0, p99_ms=0.0, max_ms=0.0, mean_ms=0.0
)


def _optional_percentiles(data: Mapping[str, Any] | None) -> Percentiles | None:
    return None if data is None else Percentiles.from_json(data)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class BenchResult:
    """One endpoint's measured phase.

    `latency` is measured from each request's *scheduled* start in an open-loop
    run (coordinated-omission corrected), so a server that stalls is charged
    for the requests that queued behind the stall. `achieved_rate` beside
    `requested_rate` shows a generator that could not keep up. A metric that
    could not be measured is `None` with its reason (`cache_reason`,
    `gpu_reason`), never a made-up 0. `gpu_utilization` (DCGM) and `kv_cache_usage` (vLLM)
    are percentages; `error_rate` and `cache_hit_rate` fractions (0..1);
    `generator_cpu_ratio` is the harness process's CPU seconds per second of the run (1.0 =
    one core busy).
    """

    label: str
    requested_rate: float | None
    achieved_rate: float
    requests: int
    duration_seconds: float
    latency: Percentiles
    errors: Mapping[str, int]
    error_rate: float
    steps: Mapping[str, Percentiles]
    hops: Mapping[str, Percentiles]
    cache_hit_rate: float | None
    cache_reason: str | None
    time_to_first_token: Percentiles | None
    tokens_per_second: float | None
    gpu_utilization: float | None
    gpu_reason: str | None
    generator_cpu_seconds: float
    generator_cpu_ratio: float
    kv_cache_usage: float | None = None
    agent: Mapping[str, float] | None = None
    """A tool loop's turns and tool calls per answered call (`turnsPerCall`,
    `toolCallsPerCall`), over the calls whose trace had one; None when none had."""

    def to_json(self) -> dict[str, Any]:
        """camelCase keys, as stored in `status.lastBench`."""
        return {
            "label": self.label,
            "requestedRate": self.requested_rate,
            "achievedRate": self.achieved_rate,
            "requests": self.requests,
            "durationSeconds": self.duration_seconds,
            "latency": self.latency.to_json(),
            "errors": {name: self.errors.get(name, 0) for name in ERROR_CLASSES},
            "errorRate": self.error_rate,
            "steps": {name: value.to_json() for name, value in self.steps.items()},
            "hops": {name: value.to_json() for name, value in self.hops.items()},
            "cacheHitRate": self.cache_hit_rate,
            "cacheReason": self.cache_reason,
            "timeToFirstToken": (
                None if self.time_to_first_token is None else self.time_to_first_token.to_json()
            ),
            "tokensPerSecond": self.tokens_per_second,
            "gpuUtilization": self.gpu_utilization,
            "gpuReason": self.gpu_reason,
            "generatorCpuSeconds": self.generator_cpu_seconds,
            "generatorCpuRatio": self.generator_cpu_ratio,
            "kvCacheUsage": self.kv_cache_usage,
            "agent": None if self.agent is None else dict(self.agent),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchResult:
        errors = data.get("errors") or {}
        return cls(
            label=str(data["label"]),
            requested_rate=_optional_float(data.get("requestedRate")),
            achieved_rate=float(data["achievedRate"]),
            requests=int(data["requests"]),
            duration_seconds=float(data["durationSeconds"]),
            latency=Percentiles.from_json(data["latency"]),
            errors={name: int(errors.get(name, 0)) for name in ERROR_CLASSES},
            error_rate=float(data["errorRate"]),
            steps={k: Percentiles.from_json(v) for k, v in (data.get("steps") or {}).items()},
            hops={k: Percentiles.from_json(v) for k, v in (data.get("hops") or {}).items()},
            cache_hit_rate=_optional_float(data.get("cacheHitRate")),
            cache_reason=data.get("cacheReason"),
            time_to_first_token=_optional_percentiles(data.get("timeToFirstToken")),
            tokens_per_second=_optional_float(data.get("tokensPerSecond")),
            gpu_utilization=_optional_float(data.get("gpuUtilization")),
            gpu_reason=data.get("gpuReason"),
            generator_cpu_seconds=float(data.get("generatorCpuSeconds", 0.0)),
            generator_cpu_ratio=float(data.get("generatorCpuRatio", 0.0)),
            kv_cache_usage=_optional_float(data.get("kvCacheUsage")),
            agent=(
                {str(k): float(v) for k, v in data["agent"].items()}
                if isinstance(data.get("agent"), Mapping)
                else None
            ),
        )
