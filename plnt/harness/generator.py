"""The load generator: open and closed loop against one or more endpoints at once.

Open loop (`LoadPlan.rate`): request *i* is due at `start + i / rate` whatever the
server does, and its latency runs from that due instant, not from when it was sent.
A server that stalls for a second is therefore charged for every request that should
have gone out during the stall (the coordinated-omission correction); a closed loop, or
an open loop timed from the send, would record one slow request and a second of silence.
A generator that falls behind (a busy machine, too few senders) shows the same way: as
latency, and as `achieved_rate` below `requested_rate`, never as a fast server.

Closed loop (`LoadPlan.concurrency`): that many workers, each sending its next request
when the previous answer is read; latency runs from the send.

Endpoints that share a label are one target (a revision's replicas): its requests go
round-robin over their URLs, and the rate or concurrency is per label. Every label runs
in the same window on one client session, so a compare sees the same minute of the
machine. What is recorded, per label, is in `BenchResult`; how each number is made is in
docs/bench.md.

Errors: `PlanError` for a plan that cannot run; failures of single requests are results
(`errors` by class), never exceptions.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from yarl import URL

from plnt.api.envelopes import invoke_envelope
from plnt.api.headers import CACHE_CONTROL, CacheMode
from plnt.harness import counters, timings
from plnt.harness.histograms import LatencyHistogram
from plnt.harness.plan import Endpoint, LoadPlan, PlanError, Progress
from plnt.harness.result import ERROR_CLASSES, BenchResult

_TRUE = frozenset({"true", "1", "yes"})
_NDJSON = "application/x-ndjson"
PROGRESS_INTERVAL = 1.0
"""Seconds between progress reports and between GPU samples."""
OPEN_LOOP_CONNECTIONS = (32, 256)
"""Bounds of an open-loop target's connection pool (an eighth of its rate in between: a
server answering within 8 ms needs no more). Requests beyond it wait for a connection,
and that wait is part of their latency; a larger pool only makes an overloaded server
thrash on new connections."""


SCRAPE_CONNECTIONS = 8


def streaming(url: str) -> bool:
    """Whether an invoke URL asks for the NDJSON stream (`?stream=true`)."""
    return URL(url).query.get("stream", "").lower() in _TRUE


def connections_for(plan: LoadPlan) -> int:
    """The connection pool one target needs under `plan`."""
    if plan.concurrency is not None:
        return plan.concurrency
    assert plan.rate is not None
    low, high = OPEN_LOOP_CONNECTIONS
    return max(low, min(high, math.ceil(plan.rate / 8)))


def error_class(status: int) -> str | None:
    """`4xx`, `5xx`, or None for an answer that is not an error."""
    if status >= 500:
        return "5xx"
    if status >= 400:
        return "4xx"
    return None


@dataclass
class _Clock:
    """The run's instants on the `time.perf_counter` clock."""

    start: float
    measure_start: float
    measure_end: float


@dataclass
class _Recorder:
    """Everything one target measured in the measured phase."""

    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    first_token: LatencyHistogram = field(default_factory=LatencyHistogram)
    steps: dict[str, LatencyHistogram] = field(default_factory=dict)
    hops: dict[str, LatencyHistogram] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ERROR_CLASSES, 0))
    requests: int = 0
    answered_in_window: int = 0
    last_answer: float = 0.0
    body_hits: int = 0
    body_misses: int = 0
    body_cache_seen: bool = False
    decode_tokens: int = 0
    decode_seconds: float = 0.0
    agent_calls: int = 0
    agent_turns: int = 0
    agent_tool_calls: int = 0

    def record_hops(self, pairs: Iterator[tuple[str, float]]) -> None:
        for name, milliseconds in pairs:
            histogram = self.hops.get(name)
            if histogram is None:
                histogram = self.hops[name] = LatencyHistogram()
            histogram.record_ms(milliseconds)

    def record_body(self, body: Any) -> None:
        """Steps, runner hops (streams only pass `timings` here), cache counts, from a body."""
        for step, milliseconds in timings.step_durations(body.get("trace")):
            histogram = self.steps.get(step)
            if histogram is None:
                histogram = self.steps[step] = LatencyHistogram()
            histogram.record_ms(milliseconds)
        agent = timings.agent_counts(body.get("trace"))
        if agent is not None:
            self.agent_calls += 1
            self.agent_turns += agent[0]
            self.agent_tool_calls += agent[1]
        counts = timings.cache_counts(body)
        if counts is not None:
            self.body_cache_seen = True
            self.body_hits += counts[0]
            self.body_misses += counts[1]


@dataclass
class _Answer:
    """What one request came back with."""

    status: int = 0
    failure: str | None = None  # "timeout" or "connection"
    body: Any = None
    server_timing: str | None = None
    first_token: float | None = None
    last_token: float | None = None
    pieces: int = 0


class _Target:
    """One label: its URLs, its request bodies, and what it measured."""

    def __init__(self, label: str, endpoints: Sequence[Endpoint], plan: LoadPlan) -> None:
        self.label = label
        first = endpoints[0]
        self.urls = [endpoint.invoke_url for endpoint in endpoints]
        self.stream = [streaming(url) for url in self.urls]
        self.headers = {"Content-Type": "application/json", **first.headers}
        self.bypasses_cache = not first.cache_of_runners and (
            CacheMode.of_cache_control(self.headers.get(CACHE_CONTROL)) is CacheMode.BYPASS
        )
        """The requests ask not to use the step cache: the runners' counters (which count
        every caller) say nothing of them, their answers do."""
        self.ssl: Any = True if first.ssl is None else first.ssl
        self.runner_metrics_urls = [u for e in endpoints for u in e.runner_metrics_urls]
        self.gpu = counters.GpuSampler(
            next((e.backend_metrics_url for e in endpoints if e.backend_metrics_url), None)
        )
        self.bodies = [orjson.dumps(invoke_envelope(value)) for value in plan.inputs]
        self.recorder = _Recorder()
        self.cache_before: counters.CacheSnapshot | None = None
        self.cache_after: counters.CacheSnapshot | None = None
        self.budget_ended: float | None = None
        self._sequence = itertools.count()
        self.timeout_seconds = plan.timeout_seconds
        self.timeout = aiohttp.ClientTimeout(total=plan.timeout_seconds)

    def next_request(self) -> tuple[int, bytes]:
        """(URL index, body) of the next request: URLs round-robin, inputs cycled."""
        index = next(self._sequence)
        return index % len(self.urls), self.bodies[index % len(self.bodies)]

    async def send(
        self,
        session: aiohttp.ClientSession,
        index: int,
        body: bytes,
        limit: aiohttp.ClientTimeout,
    ) -> _Answer:
        """POST one invocation; its status and parsed body, or how it failed."""
        answer = _Answer()
        try:
            async with session.post(
                self.urls[index], data=body, headers=self.headers, timeout=limit, ssl=self.ssl
            ) as response:
                answer.status = response.status
                answer.server_timing = response.headers.get("Server-Timing")
                if self.stream[index] and _NDJSON in response.headers.get("Content-Type", ""):
                    await _read_stream(response, answer)
                else:
                    raw = await response.read()
                    if response.status < 300 and raw:
                        answer.body = _loads(raw)
        except TimeoutError:
            answer.failure = "timeout"
        except aiohttp.ClientError:
            answer.failure = "connection"
        return answer

    async def invoke(
        self, session: aiohttp.ClientSession, began: float, record: bool, clock: _Clock
    ) -> None:
        """One request, timed from `began` (its due instant in an open loop).

        The timeout runs from `began` too: a request sent late gets what is left of it, and
        one already `timeout_seconds` late is a timeout without being sent. So a backlog
        behind a stalled server ends within `timeout_seconds` of the window's end.
        """
        index, body = self.next_request()
        timeout = self.timeout
        late = time.perf_counter() - began
        if late > self.timeout_seconds * 0.01:
            remaining = self.timeout_seconds - late
            if remaining <= 0:
                if record:
                    self.recorder.requests += 1
                    self.recorder.errors["timeout"] += 1
                return
            timeout = aiohttp.ClientTimeout(total=remaining)
        answer = await self.send(session, index, body, timeout)
        ended = time.perf_counter()
        recorder = self.recorder
        if answer.failure is None and clock.measure_start <= ended < clock.measure_end:
            recorder.answered_in_window += 1
        if not record:
            return
        recorder.requests += 1
        recorder.last_answer = max(recorder.last_answer, ended)
        failure = answer.failure or error_class(answer.status)
        if failure is not None:
            recorder.errors[failure] += 1
            return
        recorder.latency.record_ms((ended - began) * 1000.0)
        if answer.server_timing:
            recorder.record_hops(timings.server_timing(answer.server_timing))
        if isinstance(answer.body, dict):
            recorder.record_body(answer.body)
            if self.stream[index]:
                recorder.record_hops(timings.body_hops(answer.body.get("timings")))
        if answer.first_token is not None:
            recorder.first_token.record_ms((answer.first_token - began) * 1000.0)
            tokens = timings.completion_tokens(answer.body) or answer.pieces
            if answer.last_token is not None and tokens > 1:
                recorder.decode_tokens += tokens - 1
                recorder.decode_seconds += answer.last_token - answer.first_token

    def progress(self, clock: _Clock) -> Progress:
        recorder = self.recorder
        return Progress(
            label=self.label,
            elapsed_seconds=max(0.0, time.perf_counter() - clock.measure_start),
            requests=recorder.requests,
            errors=sum(recorder.errors.values()),
            p50_ms=recorder.latency.percentile_ms(50.0),
            p99_ms=recorder.latency.percentile_ms(99.0),
        )


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


async def _read_stream(response: aiohttp.ClientResponse, answer: _Answer) -> None:
    """Read an NDJSON invoke stream: delta times, and the last line's body or error status."""
    buffer = b""
    ended = False
    async for chunk in response.content.iter_any():
        buffer += chunk
        while (newline := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:newline], buffer[newline + 1 :]
            item = _loads(line) if line.strip() else None
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "delta":
                now = time.perf_counter()
                if answer.first_token is None:
                    answer.first_token = now
                answer.last_token = now
                answer.pieces += 1
            elif kind == "result":
                answer.body, ended = item, True
            elif kind == "error":
                status = item.get("status")
                answer.status = status if isinstance(status, int) else 500
                ended = True
    if not ended:
        answer.failure = "connection"  # the stream stopped before its last line


async def _sleep_until(instant: float) -> None:
    delay = instant - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


async def _open_loop(
    target: _Target, session: aiohttp.ClientSession, plan: LoadPlan, clock: _Clock
) -> None:
    """Request *i* is due at `clock.start + i / rate`; a pool of senders takes them in order.

    Each sender takes the next due instant, waits for it, sends, and records the latency
    from that instant. When every sender is busy (a slow or stalled server) the next
    request goes out late and is charged from its due instant: the schedule never waits
    for the server, and no task or queue grows with the backlog (wrk2's model). The pool
    is as large as the target's connection pool.
    """
    assert plan.rate is not None
    interval = 1.0 / plan.rate
    budget = plan.requests
    due = itertools.count()
    measured = 0

    async def sender() -> None:
        nonlocal measured
        while True:
            scheduled = clock.start + next(due) * interval
            if scheduled >= clock.measure_end:
                return
            record = scheduled >= clock.measure_start
            if record:
                if budget is not None and measured >= budget:
                    return
                measured += 1
            if scheduled > time.perf_counter():
                await _sleep_until(scheduled)
            await target.invoke(session, scheduled, record, clock)

    async with asyncio.TaskGroup() as senders:
        for _ in range(connections_for(plan)):
            senders.create_task(sender())
    if budget is not None and measured >= budget:
        target.budget_ended = target.recorder.last_answer


async def _closed_loop(
    target: _Target, session: aiohttp.ClientSession, plan: LoadPlan, clock: _Clock
) -> None:
    """`plan.concurrency` workers, each sending when its previous answer is read."""
    assert plan.concurrency is not None
    budget = plan.requests
    taken = 0

    async def worker() -> None:
        nonlocal taken
        while (now := time.perf_counter()) < clock.measure_end:
            record = now >= clock.measure_start
            if record and budget is not None:
                if taken >= budget:
                    return
                taken += 1
            await target.invoke(session, now, record, clock)

    async with asyncio.TaskGroup() as workers:
        for _ in range(plan.concurrency):
            workers.create_task(worker())
    if budget is not None and taken >= budget:
        target.budget_ended = target.recorder.last_answer


async def _drive(
    target: _Target,
    session: aiohttp.ClientSession,
    scraping: aiohttp.ClientSession,
    plan: LoadPlan,
    clock: _Clock,
) -> None:
    await _sleep_until(clock.start)
    if plan.rate is not None:
        await _open_loop(target, session, plan, clock)
    else:
        await _closed_loop(target, session, plan, clock)
    if target.runner_metrics_urls:
        target.cache_after = await counters.cache_snapshot(scraping, target.runner_metrics_urls)


async def _observe(
    targets: Sequence[_Target],
    session: aiohttp.ClientSession,
    clock: _Clock,
    progress: Callable[[Progress], None] | None,
    cpu: list[float],
) -> None:
    """From the measured phase's start: CPU, cache counters, then GPU samples and progress."""
    await _sleep_until(clock.measure_start)
    cpu.append(time.process_time())
    for target in targets:
        if target.runner_metrics_urls and target.cache_before is None:
            target.cache_before = await counters.cache_snapshot(session, target.runner_metrics_urls)
    tick = clock.measure_start
    while True:
        await asyncio.gather(*(target.gpu.sample(session) for target in targets))
        if progress is not None:
            for target in targets:
                progress(target.progress(clock))
        tick = max(tick + PROGRESS_INTERVAL, time.perf_counter() + PROGRESS_INTERVAL / 2)
        if tick >= clock.measure_end:
            break
        await _sleep_until(tick)


def _group(endpoints: Sequence[Endpoint]) -> dict[str, list[Endpoint]]:
    grouped: dict[str, list[Endpoint]] = {}
    for endpoint in endpoints:
        grouped.setdefault(endpoint.label, []).append(endpoint)
    return grouped


def new_session(connections: int) -> aiohttp.ClientSession:
    """A client session for `connections` keep-alive connections, without cookie handling."""
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=0)
    return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())


async def run(
    plan: LoadPlan,
    endpoints: Sequence[Endpoint],
    *,
    session: aiohttp.ClientSession | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> list[BenchResult]:
    """Run `plan` against every endpoint side by side in the same window; one result each.

    Results come in the order the labels first appear in `endpoints`. Without `session`
    one is made for the run (sized for the plan) and closed after it.
    """
    if not endpoints:
        raise PlanError("at least one endpoint is needed")
    targets = [_Target(label, group, plan) for label, group in _group(endpoints).items()]
    own = session is None
    active = new_session(connections_for(plan) * len(targets)) if session is None else session
    # Counters are read on a pool of their own, so a busy load pool never delays a sample.
    scraping = new_session(SCRAPE_CONNECTIONS)
    try:
        if plan.warmup_seconds == 0:
            for target in targets:
                if target.runner_metrics_urls:
                    target.cache_before = await counters.cache_snapshot(
                        scraping, target.runner_metrics_urls
                    )
        start = time.perf_counter() + 0.01
        clock = _Clock(
            start,
            start + plan.warmup_seconds,
            start + plan.warmup_seconds + plan.duration_seconds,
        )
        cpu: list[float] = []
        async with asyncio.TaskGroup() as group:
            observer = group.create_task(_observe(targets, scraping, clock, progress, cpu))
            drivers = [group.create_task(_drive(t, active, scraping, plan, clock)) for t in targets]
            await asyncio.wait(drivers)
            observer.cancel()
        drained = time.perf_counter()
        if progress is not None:
            for target in targets:
                progress(target.progress(clock))
        cpu_seconds = time.process_time() - (cpu[0] if cpu else time.process_time())
    finally:
        await scraping.close()
        if own:
            await active.close()
    wall = max(1e-9, drained - clock.measure_start)
    return [_result(target, plan, clock, cpu_seconds, cpu_seconds / wall) for target in targets]


def _result(
    target: _Target, plan: LoadPlan, clock: _Clock, cpu_seconds: float, cpu_ratio: float
) -> BenchResult:
    recorder = target.recorder
    window_end = clock.measure_end
    if target.budget_ended is not None:
        window_end = min(window_end, max(target.budget_ended, clock.measure_start + 1e-9))
    duration = window_end - clock.measure_start
    answered = recorder.answered_in_window
    if target.budget_ended is not None:
        answered = recorder.requests
    errors = sum(recorder.errors.values())
    cache_rate, cache_reason = _cache(target)
    gpu, gpu_reason = target.gpu.gpu_utilization()
    return BenchResult(
        label=target.label,
        requested_rate=plan.rate,
        achieved_rate=answered / duration if duration > 0 else 0.0,
        requests=recorder.requests,
        duration_seconds=duration,
        latency=recorder.latency.percentiles(),
        errors=dict(recorder.errors),
        error_rate=errors / recorder.requests if recorder.requests else 0.0,
        steps=_percentiles(recorder.steps),
        hops=_percentiles(recorder.hops),
        cache_hit_rate=cache_rate,
        cache_reason=cache_reason,
        time_to_first_token=(
            recorder.first_token.percentiles() if recorder.first_token.count else None
        ),
        tokens_per_second=(
            recorder.decode_tokens / recorder.decode_seconds if recorder.decode_seconds else None
        ),
        gpu_utilization=gpu,
        gpu_reason=gpu_reason,
        generator_cpu_seconds=cpu_seconds,
        generator_cpu_ratio=cpu_ratio,
        kv_cache_usage=target.gpu.kv_cache_usage(),
        agent=(
            {
                "turnsPerCall": recorder.agent_turns / recorder.agent_calls,
                "toolCallsPerCall": recorder.agent_tool_calls / recorder.agent_calls,
            }
            if recorder.agent_calls
            else None
        ),
    )


def _percentiles(histograms: Mapping[str, LatencyHistogram]) -> dict[str, Any]:
    return {name: histogram.percentiles() for name, histogram in histograms.items()}


def _cache(target: _Target) -> tuple[float | None, str | None]:
    """From the runners' counters when the endpoint names them (unless its requests bypass
    the cache), else from the answers."""
    counted = target.cache_before is not None and target.cache_after is not None
    if counted and not (target.bypasses_cache and target.recorder.body_cache_seen):
        assert target.cache_before is not None and target.cache_after is not None
        return counters.cache_hit_rate(target.cache_before, target.cache_after)
    recorder = target.recorder
    if not recorder.body_cache_seen:
        return None, "no runner metrics URL, and the answers carry no cache counts"
    total = recorder.body_hits + recorder.body_misses
    if total == 0:
        return None, "no step consulted the cache (no cacheable step, or the cache is off)"
    return recorder.body_hits / total, None
