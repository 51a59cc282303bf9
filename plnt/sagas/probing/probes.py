"""Judging a canary over HTTP: the smoke case, and the analysis under load.

Both call the runners' own `POST /invoke` directly (not through the API server), so
what they measure is the revision, not the proxy, and both bypass the runners' step
cache (`Cache-Control: no-cache`, `plnt.api.headers`): a canary is judged on the answers
and answer times of its own steps, never on a cache that the same inputs filled a moment
before (the analysis cycles a few inputs for its whole window). The analysis is a bench
(`plnt.harness`) of the canary and the stable side by side in the same window, so a
busy machine slows both alike. Messages state measured values against limits
("p95 412 ms > limit 250 ms; stable 120 ms") because they end up in conditions.

Errors: `SmokeFailed` and `AnalysisFailed` (the canary is bad: not worth retrying),
`Unreachable` (a transport failure: worth retrying).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from yarl import URL

from plnt import harness
from plnt.api.envelopes import invoke_envelope
from plnt.api.headers import BYPASS_HEADERS
from plnt.harness import BenchResult, Endpoint, LoadPlan, Progress
from plnt.workflowspec import model, smoke


class ProbeError(Exception):
    """A probe did not pass; the message is meant for a condition."""


class SmokeFailed(ProbeError):
    """The canary answered, but not as the smoke case expects."""


class AnalysisFailed(ProbeError):
    """The canary exceeded an analysis limit."""


class Unreachable(ProbeError):
    """A runner could not be reached at all."""


async def invoke(
    session: aiohttp.ClientSession, endpoint: str, inputs: dict[str, Any]
) -> tuple[int, Any]:
    """POST `{endpoint}/invoke`, bypassing the step cache; (status, parsed body)."""
    try:
        async with session.post(
            f"{endpoint}/invoke", json=invoke_envelope(inputs), headers=BYPASS_HEADERS
        ) as response:
            return response.status, await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError) as error:
        raise Unreachable(f"{endpoint} unreachable: {error or type(error).__name__}") from error


async def run_smoke(
    session: aiohttp.ClientSession,
    endpoints: Sequence[str],
    inputs: dict[str, Any],
    expect: model.Expectations,
) -> str:
    """Run the smoke case on every endpoint; the summary, or SmokeFailed naming the failures."""
    for endpoint in endpoints:
        status, body = await invoke(session, endpoint, inputs)
        if status != 200:
            error = body.get("error", {}) if isinstance(body, dict) else {}
            detail = error.get("message") if isinstance(error, dict) else None
            raise SmokeFailed(f"smoke failed on {endpoint}: HTTP {status}: {detail or body}")
        failures = smoke.check(expect, body.get("output"))
        if failures:
            raise SmokeFailed(f"smoke failed on {endpoint}: " + "; ".join(failures))
    return f"smoke passed on {len(endpoints)} replica(s)"


@dataclass(frozen=True)
class Reachability:
    """Whether a backend's API answered, what it said, and how long it took."""

    ok: bool
    detail: str
    milliseconds: int


async def check_reachable(session: aiohttp.ClientSession, endpoint: str) -> Reachability:
    """Whether an OpenAI-compatible API answers `GET {endpoint}/models`, timed.

    Any HTTP answer below 500 means the server is up (401 just means it wants a key).
    """
    url = f"{endpoint.rstrip('/')}/models"
    began = time.perf_counter()
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=3)) as response:
            ok, detail = response.status < 500, f"GET {url}: HTTP {response.status}"
    except (aiohttp.ClientError, TimeoutError) as error:
        ok, detail = False, f"GET {url}: {error or type(error).__name__}"
    return Reachability(ok, detail, round((time.perf_counter() - began) * 1000.0))


async def reachable(session: aiohttp.ClientSession, endpoint: str) -> tuple[bool, str]:
    """`check_reachable` without the time: (up, what it said)."""
    found = await check_reachable(session, endpoint)
    return found.ok, found.detail


@dataclass(frozen=True)
class BackendLoad:
    """What a backend reports it is doing: requests running, and requests waiting."""

    in_flight: int
    queue_depth: int


# vLLM's scheduler gauges (one sample per served model); see docs/sagas.md, "Placement".
_RUNNING = "vllm:num_requests_running"
_WAITING = "vllm:num_requests_waiting"
# plnt's model server (`plnt.processes.llamaserving`), which llama-cpp-python lacks.
_PLNT_RUNNING = "plnt_model_requests_running"
_PLNT_WAITING = "plnt_model_requests_waiting"


def server_root(endpoint: str) -> URL:
    """The server an OpenAI-compatible `/v1` base URL belongs to (vLLM, ollama)."""
    url = URL(endpoint)
    path = url.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return url.with_path(path or "/", encoded=False).with_query(None)


def metrics_url(endpoint: str) -> str:
    """vLLM serves Prometheus metrics at the server's root, beside the `/v1` API."""
    root = server_root(endpoint)
    return str(root.with_path(f"{root.path.rstrip('/')}/metrics", encoded=False))


def ollama_ps_url(endpoint: str) -> str:
    """ollama lists the models it holds in memory at `GET /api/ps`, beside `/v1`."""
    root = server_root(endpoint)
    return str(root.with_path(f"{root.path.rstrip('/')}/api/ps", encoded=False))


def parse_model_server_load(text: str) -> BackendLoad | None:
    """The running and waiting counts plnt's own model server reports (`plnt up --model`,
    `plnt.processes.llamaserving`), None if absent."""
    return _load_of(text, _PLNT_RUNNING, _PLNT_WAITING)


def parse_load(text: str) -> BackendLoad | None:
    """vLLM's scheduler gauges, else plnt's model server's; None when neither is there."""
    return parse_vllm_load(text) or parse_model_server_load(text)


def parse_vllm_load(text: str) -> BackendLoad | None:
    """The running and waiting request counts in vLLM's metrics text (None if absent)."""
    return _load_of(text, _RUNNING, _WAITING)


def _load_of(text: str, running: str, waiting: str) -> BackendLoad | None:
    totals: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            if family.name in (running, waiting):
                totals[family.name] = sum(sample.value for sample in family.samples)
    except ValueError:
        return None
    if running not in totals:
        return None
    return BackendLoad(round(totals[running]), round(totals.get(waiting, 0.0)))


async def fetch_text(session: aiohttp.ClientSession, url: str) -> tuple[str | None, str]:
    """The body of `GET url` when it answers 200 (else None), and what was asked."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=3)) as response:
            if response.status != 200:
                return None, f"GET {url}: HTTP {response.status}"
            return await response.text(), f"GET {url}: ok"
    except (aiohttp.ClientError, TimeoutError) as error:
        return None, f"GET {url}: {error or type(error).__name__}"


async def backend_load(
    session: aiohttp.ClientSession, endpoint: str
) -> tuple[BackendLoad | None, str]:
    """The load a vLLM server reports at `GET /metrics`, and what was asked.

    None (load unknown, the declared capacity stands) when the metrics cannot be read;
    that alone never makes a backend unreachable.
    """
    text, detail = await fetch_text(session, metrics_url(endpoint))
    if text is None:
        return None, detail
    load = parse_vllm_load(text)
    return load, detail if load is not None else detail[: -len("ok")] + "no vLLM scheduler gauges"


COUNT_BOUND_SECONDS = 240.0
"""The longest a count-bound analysis (`requests`, no `rate` or `duration`) may run: well
inside the analyze activity's 10-minute start-to-close timeout."""
CLOSED_LOOP_CONCURRENCY = 4
"""Requests in flight per revision in a closed-loop analysis (the original form's four)."""
DEFAULT_DURATION = 10.0
"""Seconds an open-loop analysis runs when it names a `rate` but no `duration`."""


@dataclass(frozen=True)
class Limits:
    """What the canary must stay within; None is no limit."""

    max_error_rate: float | None = None
    max_p95_ms: float | None = None
    min_cache_hit_rate: float | None = None


def analysis_plan(
    *,
    requests: int,
    rate: float | None,
    duration: float | None,
    inputs: dict[str, Any],
    timeout: float = 30.0,
) -> LoadPlan:
    """The bench an analysis runs against each revision (see `CanaryAnalysis`).

    `rate`: open loop for `duration` (default 10 s). Only `duration`: closed loop, four
    in flight, for that long. Neither: the original form, `requests` requests four at a
    time (bounded by `COUNT_BOUND_SECONDS`).
    """
    if rate is not None:
        return LoadPlan(
            duration_seconds=duration or DEFAULT_DURATION,
            rate=rate,
            inputs=(inputs,),
            timeout_seconds=timeout,
        )
    if duration is not None:
        return LoadPlan(
            duration_seconds=duration,
            concurrency=CLOSED_LOOP_CONCURRENCY,
            inputs=(inputs,),
            timeout_seconds=timeout,
        )
    return LoadPlan(
        duration_seconds=COUNT_BOUND_SECONDS,
        concurrency=CLOSED_LOOP_CONCURRENCY,
        requests=requests,
        inputs=(inputs,),
        timeout_seconds=timeout,
    )


def analysis_endpoints(
    canary: Sequence[str], stable: Sequence[str], *, stream: bool = False
) -> list[Endpoint]:
    """The runners' `/invoke` (replicas of one revision share a label) and `/metrics`;
    `stream`: the NDJSON stream, so the bench measures time to first token and tokens/s."""
    path = "/invoke?stream=true" if stream else "/invoke"
    return [
        Endpoint(
            label,
            f"{base}{path}",
            headers=BYPASS_HEADERS,
            runner_metrics_urls=(f"{base}/metrics",),
            cache_of_runners=True,  # `minCacheHitRate`: the live traffic's, not the probe's
        )
        for label, bases in (("canary", canary), ("stable", stable))
        for base in bases
    ]


@dataclass(frozen=True)
class Verdict:
    """An analysis outcome: the headline numbers, the message, and both bench results."""

    error_rate: float
    p95: float
    stable_p95: float | None
    message: str
    canary: BenchResult
    stable: BenchResult | None = None


def _ms(value: float) -> str:
    return f"{value:.0f} ms"


def _ratio(value: float) -> str:
    return f"{value:.2f}"


def _checks(
    canary: BenchResult, stable: BenchResult | None, limits: Limits
) -> list[tuple[bool, str]]:
    """(passed, "measured <op> limit X; stable Y") for every limit that is set."""
    checks: list[tuple[bool, str]] = []

    def context(value: str | None) -> str:
        return f"; stable {value}" if stable is not None and value is not None else ""

    if limits.max_p95_ms is not None:
        stable_p95 = _ms(stable.latency.p95_ms) if stable and stable.latency.count else None
        if canary.latency.count == 0:
            checks.append((False, "p95 unmeasured: no request succeeded" + context(stable_p95)))
        else:
            p95, limit = canary.latency.p95_ms, limits.max_p95_ms
            ok = p95 <= limit
            checks.append(
                (
                    ok,
                    f"p95 {_ms(p95)} {'<=' if ok else '>'} limit {_ms(limit)}"
                    + context(stable_p95),
                )
            )
    if limits.max_error_rate is not None:
        rate, limit = canary.error_rate, limits.max_error_rate
        ok = rate <= limit
        measured = f"error rate {_ratio(rate)} {'<=' if ok else '>'} limit {_ratio(limit)}"
        checks.append((ok, measured + context(_ratio(stable.error_rate) if stable else None)))
    if limits.min_cache_hit_rate is not None:
        limit = limits.min_cache_hit_rate
        stable_hits = (
            _ratio(stable.cache_hit_rate) if stable and stable.cache_hit_rate is not None else None
        )
        if canary.cache_hit_rate is None:
            reason = canary.cache_reason or "no cache counters"
            checks.append((False, f"cache hit rate unmeasured ({reason}), limit {_ratio(limit)}"))
        else:
            hit_rate = canary.cache_hit_rate
            ok = hit_rate >= limit
            measured = (
                f"cache hit rate {_ratio(hit_rate)} {'>=' if ok else '<'} limit {_ratio(limit)}"
            )
            checks.append((ok, measured + context(stable_hits)))
    return checks


def judge(canary: BenchResult, stable: BenchResult | None, limits: Limits) -> Verdict:
    """Hold the canary's bench to the limits, naming each measured value against its limit.

    Raises `AnalysisFailed` ("analysis failed: p95 412 ms > limit 250 ms; stable 120 ms")
    when any limit is exceeded, or when no request to the canary was made at all.
    """
    if canary.requests == 0:
        raise AnalysisFailed("analysis failed: no request to the canary was made")
    stable_p95 = stable.latency.p95_ms if stable is not None and stable.latency.count else None
    checks = _checks(canary, stable, limits)
    failed = [text for ok, text in checks if not ok]
    if failed:
        raise AnalysisFailed("analysis failed: " + "; ".join(failed))
    load = f"{canary.requests} requests"
    if canary.requested_rate is not None:
        load += f" at {canary.achieved_rate:.1f}/s (requested {canary.requested_rate:g}/s)"
    measured = [text for _, text in checks] or [
        f"error rate {_ratio(canary.error_rate)}",
        f"p95 {_ms(canary.latency.p95_ms)}"
        + (f" (stable p95 {_ms(stable_p95)})" if stable_p95 is not None else ""),
    ]
    return Verdict(
        canary.error_rate,
        canary.latency.p95_ms,
        stable_p95,
        f"analysis passed: {load}, " + ", ".join(measured),
        canary,
        stable,
    )


async def analyze(
    canary: Sequence[str],
    stable: Sequence[str],
    plan: LoadPlan,
    limits: Limits,
    *,
    progress: Callable[[Progress], None] | None = None,
    stream: bool = False,
) -> Verdict:
    """Bench the canary and the stable replicas side by side in one window, then judge."""
    endpoints = analysis_endpoints(canary, stable, stream=stream)
    results = await harness.run(plan, endpoints, progress=progress)
    by_label = {result.label: result for result in results}
    return judge(by_label["canary"], by_label.get("stable"), limits)
