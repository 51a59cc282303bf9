"""The canary analysis held to `spec.slo`: each objective judged on the analysis bench.

The analysis benches the canary and the stable side by side (`probing.analyze`); when the
run states objectives, the canary's bench is also held to every one of them, naming the
canary's measured value, the objective and the stable's value in one line each
("timeToFirstToken p95 612 ms > objective 500 ms; stable 420 ms"). A miss fails the
analysis as `SLOMissed` (its own reason and Event), apart from `AnalysisFailed` (the
analysis's own limits), so an operator sees at once which promise the canary broke.

The bench reports p50, p90, p95, p99 and the maximum: a latency objective is read at the
smallest of these at or above its percentile (the maximum beyond p99), which is never
kinder than the objective and is how `plnt bench` reads it too
(`plnt.api.benchattainment`). Time per output token is the bench's mean (its decode time
over its decode tokens) and tokens per second its aggregate rate: the bench keeps no
per-call distribution of them. Cost is not judged here (the analysis runs on the canary's own
replicas, not the backend's bill); `status.slo` judges it on live traffic.

Pure; errors: none (the caller raises).
"""

from __future__ import annotations

from collections.abc import Callable

from plnt.api.slo import LatencyObjective, ServiceLevelObjectives
from plnt.harness.result import BenchResult, Percentiles

_REPORTED = (
    (50.0, "p50", "p50_ms"),
    (90.0, "p90", "p90_ms"),
    (95.0, "p95", "p95_ms"),
    (99.0, "p99", "p99_ms"),
    (100.0, "max", "max_ms"),
)


def _at(percentiles: Percentiles | None, percentile: float) -> tuple[str, float] | None:
    """The reported percentile at or above `percentile`, and its value (ms)."""
    if percentiles is None or not percentiles.count:
        return None
    for reported, label, field in _REPORTED:
        if reported >= percentile:
            return label, float(getattr(percentiles, field))
    return "max", percentiles.max_ms


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _latency(
    name: str,
    objective: LatencyObjective,
    of: Callable[[BenchResult], Percentiles | None],
    canary: BenchResult,
    stable: BenchResult | None,
) -> tuple[bool, str]:
    measured = _at(of(canary), objective.percentile)
    target = f"objective {_ms(objective.milliseconds)} at p{objective.percentile:g}"
    if measured is None:
        return False, f"{name} unmeasured on the canary ({target})"
    label, value = measured
    theirs = _at(of(stable), objective.percentile) if stable is not None else None
    context = f"; stable {_ms(theirs[1])}" if theirs is not None else ""
    ok = value <= objective.milliseconds
    relation = "<=" if ok else ">"
    return ok, f"{name} {label} {_ms(value)} {relation} {target}{context}"


def _per_token(result: BenchResult | None) -> float | None:
    rate = result.tokens_per_second if result is not None else None
    return 1000.0 / rate if rate else None


def judge(
    slo: ServiceLevelObjectives, canary: BenchResult, stable: BenchResult | None
) -> list[tuple[bool, str]]:
    """(met, "measured vs objective; stable") for every objective the bench can judge."""
    checks: list[tuple[bool, str]] = []
    if slo.time_to_first_token is not None:
        checks.append(
            _latency(
                "timeToFirstToken",
                slo.time_to_first_token,
                lambda r: r.time_to_first_token,
                canary,
                stable,
            )
        )
    if (objective := slo.time_per_output_token) is not None:
        mine, theirs = _per_token(canary), _per_token(stable)
        target = f"objective {_ms(objective.milliseconds)}"
        if mine is None:
            checks.append((False, f"timePerOutputToken unmeasured on the canary ({target})"))
        else:
            ok = mine <= objective.milliseconds
            context = f"; stable {_ms(theirs)}" if theirs is not None else ""
            checks.append(
                (
                    ok,
                    f"timePerOutputToken mean {_ms(mine)} {'<=' if ok else '>'} {target}{context}",
                )
            )
    if slo.latency is not None:
        checks.append(_latency("latency", slo.latency, lambda r: r.latency, canary, stable))
    if (limit := slo.max_error_rate) is not None:
        ok = canary.error_rate <= limit
        context = f"; stable {stable.error_rate:.3f}" if stable is not None else ""
        checks.append(
            (
                ok,
                f"errorRate {canary.error_rate:.3f} {'<=' if ok else '>'} objective "
                f"{limit:.3f}{context}",
            )
        )
    if (rate := slo.min_tokens_per_second) is not None:
        mine_rate = canary.tokens_per_second
        theirs_rate = stable.tokens_per_second if stable is not None else None
        target = f"objective {rate.tokens_per_second:g} tokens/s"
        if mine_rate is None:
            checks.append((False, f"tokensPerSecond unmeasured on the canary ({target})"))
        else:
            ok = mine_rate >= rate.tokens_per_second
            context = f"; stable {theirs_rate:.1f} tokens/s" if theirs_rate is not None else ""
            checks.append(
                (
                    ok,
                    f"tokensPerSecond {mine_rate:.1f} tokens/s {'>=' if ok else '<'} "
                    f"{target}{context}",
                )
            )
    return checks


def missed_message(checks: list[tuple[bool, str]]) -> str | None:
    """`SLO missed: …` naming every missed objective, or None when every one was met."""
    missed = [text for ok, text in checks if not ok]
    return "SLO missed: " + "; ".join(missed) if missed else None
