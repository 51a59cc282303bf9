"""Judging a canary over HTTP: the smoke case, and the analysis under load.

Both call the runners' own `POST /invoke` directly (not through the API server), so
what they measure is the revision, not the proxy. Messages state measured values
against limits ("p95 412 ms > limit 250 ms") because they end up in conditions.

Errors: `SmokeFailed` and `AnalysisFailed` (the canary is bad: not worth retrying),
`Unreachable` (a transport failure: worth retrying).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from yarl import URL

from plnt.workflowspec import model, smoke


class ProbeError(Exception):
    """A probe did not pass; the message is meant for a condition."""


class SmokeFailed(ProbeError):
    """The canary answered, but not as the smoke case expects."""


class AnalysisFailed(ProbeError):
    """The canary exceeded an analysis limit."""


class Unreachable(ProbeError):
    """A runner could not be reached at all."""


@dataclass(frozen=True)
class Sample:
    """One invocation: whether it succeeded and how long it took."""

    ok: bool
    milliseconds: float


async def invoke(
    session: aiohttp.ClientSession, endpoint: str, inputs: dict[str, Any]
) -> tuple[int, Any]:
    """POST `{endpoint}/invoke`; (status, parsed body)."""
    try:
        async with session.post(f"{endpoint}/invoke", json={"inputs": inputs}) as response:
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


def parse_vllm_load(text: str) -> BackendLoad | None:
    """The running and waiting request counts in vLLM's metrics text (None if absent)."""
    totals: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            if family.name in (_RUNNING, _WAITING):
                totals[family.name] = sum(sample.value for sample in family.samples)
    except ValueError:
        return None
    if _RUNNING not in totals:
        return None
    return BackendLoad(round(totals[_RUNNING]), round(totals.get(_WAITING, 0.0)))


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


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


async def load(
    session: aiohttp.ClientSession,
    endpoints: Sequence[str],
    inputs: dict[str, Any],
    *,
    requests: int,
    concurrency: int = 4,
    progress: Callable[[int], None] | None = None,
) -> list[Sample]:
    """`requests` invocations spread round-robin over `endpoints`, `concurrency` at a time."""
    samples: list[Sample] = []
    counter = iter(range(requests))

    async def worker() -> None:
        for index in counter:
            endpoint = endpoints[index % len(endpoints)]
            began = time.perf_counter()
            try:
                status, _ = await invoke(session, endpoint, inputs)
                ok = status == 200
            except Unreachable:
                ok = False
            samples.append(Sample(ok, (time.perf_counter() - began) * 1000.0))
            if progress is not None:
                progress(len(samples))

    async with asyncio.TaskGroup() as group:
        for _ in range(max(1, min(concurrency, requests))):
            group.create_task(worker())
    return samples


@dataclass(frozen=True)
class Verdict:
    """An analysis outcome."""

    error_rate: float
    p95: float
    stable_p95: float | None
    message: str


def judge(
    canary: Sequence[Sample],
    stable: Sequence[Sample] | None,
    *,
    max_error_rate: float | None,
    max_p95: float | None,
) -> Verdict:
    """Compare the canary's samples with the limits (and with the stable's, for context)."""
    errors = sum(1 for sample in canary if not sample.ok)
    error_rate = errors / len(canary) if canary else 0.0
    p95 = percentile([sample.milliseconds for sample in canary], 0.95)
    stable_p95 = percentile([s.milliseconds for s in stable], 0.95) if stable else None
    context = f" (stable p95 {stable_p95:.0f} ms)" if stable_p95 is not None else ""
    problems = []
    if max_error_rate is not None and error_rate > max_error_rate:
        problems.append(f"error rate {error_rate:.2f} > limit {max_error_rate:.2f}")
    if max_p95 is not None and p95 > max_p95:
        problems.append(f"p95 {p95:.0f} ms > limit {max_p95:.0f} ms")
    measured = f"{len(canary)} requests, error rate {error_rate:.2f}, p95 {p95:.0f} ms{context}"
    if problems:
        raise AnalysisFailed("analysis failed: " + "; ".join(problems) + f"{context}")
    return Verdict(error_rate, p95, stable_p95, f"analysis passed: {measured}")
