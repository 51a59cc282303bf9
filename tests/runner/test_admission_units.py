"""The overload machinery's parts alone, on a fake clock: admission by criticality, the
retry budget's window, the breaker's states, deadlines."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from plnt.api.headers import Criticality, InvalidTimeout, parse_time_left_ms, parse_timeout
from plnt.runner import admission, breakers, deadlines, errors, retrybudget
from tests.support.waiting import eventually

WAIT_SECONDS = 10.0


class FakeClock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _until(condition: Callable[[], bool], what: str) -> None:
    await eventually(condition, within=WAIT_SECONDS, interval=0.001, what=what)


async def _hold(limiter: admission.Limiter, criticality: Criticality, gate: asyncio.Event) -> str:
    async with limiter.admitted(criticality, deadlines.NO_DEADLINE):
        await gate.wait()
    return criticality.value


async def test_a_critical_call_takes_the_place_of_the_newest_sheddable_one_and_goes_first() -> None:
    limiter = admission.Limiter("b", admission.Limits(1, 4, 5.0))
    gate = asyncio.Event()
    order: list[str] = []

    async def call(criticality: Criticality) -> str:
        async with limiter.admitted(criticality, deadlines.NO_DEADLINE):
            order.append(criticality.value)
            await gate.wait()
        return criticality.value

    holder = asyncio.create_task(call(Criticality.STANDARD))
    await _until(lambda: limiter.in_flight == 1, "the first call holds the slot")
    first_sheddable = asyncio.create_task(call(Criticality.SHEDDABLE))
    second_sheddable = asyncio.create_task(call(Criticality.SHEDDABLE))
    await _until(lambda: limiter.queued == 2, "two sheddable calls queue")
    third_sheddable = asyncio.create_task(call(Criticality.SHEDDABLE))
    with pytest.raises(errors.Overloaded, match="half full"):
        await third_sheddable  # the queue is half full: sheddable calls are refused
    standard = [asyncio.create_task(call(Criticality.STANDARD)) for _ in range(2)]
    await _until(lambda: limiter.queued == 4, "the queue is full")
    critical = asyncio.create_task(call(Criticality.CRITICAL))
    with pytest.raises(errors.Overloaded, match="more critical"):
        await second_sheddable  # the newest of the least critical gave its place
    await _until(lambda: limiter.queued == 4, "the critical call queued")
    gate.set()
    results = await asyncio.gather(holder, first_sheddable, critical, *standard)
    assert sorted(results) == sorted(["standard", "sheddable", "critical", "standard", "standard"])
    assert order == ["standard", "critical", "standard", "standard", "sheddable"]
    assert limiter.in_flight == 0
    assert limiter.counts.shed == {"sheddable": 2}


async def test_a_full_queue_of_critical_calls_refuses_a_standard_call_at_once() -> None:
    limiter = admission.Limiter("b", admission.Limits(1, 1, 5.0))
    gate = asyncio.Event()
    tasks = [asyncio.create_task(_hold(limiter, Criticality.CRITICAL, gate)) for _ in range(2)]
    await _until(lambda: limiter.queued == 1, "one critical call queues")
    with pytest.raises(errors.Overloaded, match=r"backend b \(admission queue\).*full") as refused:
        async with limiter.admitted(Criticality.STANDARD, deadlines.NO_DEADLINE):
            pass
    assert refused.value.retry_after_seconds >= 1
    gate.set()
    assert await asyncio.gather(*tasks) == ["critical", "critical"]


async def test_a_call_whose_deadline_runs_out_in_the_queue_names_the_queue() -> None:
    limiter = admission.Limiter("b", admission.Limits(1, 4, 5.0))
    gate = asyncio.Event()
    holder = asyncio.create_task(_hold(limiter, Criticality.STANDARD, gate))
    await _until(lambda: limiter.in_flight == 1, "the slot is taken")
    with pytest.raises(errors.DeadlineExceeded) as exceeded:
        async with limiter.admitted(Criticality.CRITICAL, deadlines.Deadline.after(0.01)):
            pass
    assert exceeded.value.hop == "the queue of backend b"
    assert limiter.queued == 0
    gate.set()
    await holder
    assert limiter.in_flight == 0


async def test_a_call_cancelled_in_the_queue_leaves_no_slot_taken() -> None:
    limiter = admission.Limiter("b", admission.Limits(1, 4, 5.0))
    gate = asyncio.Event()
    holder = asyncio.create_task(_hold(limiter, Criticality.STANDARD, gate))
    await _until(lambda: limiter.in_flight == 1, "the slot is taken")
    waiter = asyncio.create_task(_hold(limiter, Criticality.STANDARD, gate))
    await _until(lambda: limiter.queued == 1, "a call waits")
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    gate.set()
    await holder
    assert (limiter.in_flight, limiter.queued) == (0, 0)


def test_the_retry_budget_allows_its_share_of_the_calls_plus_the_floor_in_its_window() -> None:
    clock = FakeClock()
    budget = retrybudget.RetryBudget(retrybudget.BudgetPolicy(0.1, 3, 10.0), clock=clock)
    for _ in range(100):
        budget.called()
    allowed = sum(budget.try_retry() for _ in range(20))
    assert allowed == 13  # 3 + 10% of 100
    assert budget.refused == 7
    clock.now += 11.0  # the calls and retries left the window
    assert budget.try_retry()  # the floor again
    assert sum(budget.try_retry() for _ in range(5)) == 2


def test_the_breaker_opens_after_consecutive_failures_probes_once_and_closes_on_success() -> None:
    clock = FakeClock()
    breaker = breakers.Breaker(breakers.BreakerPolicy(3, None, 5.0), clock=clock)
    breaker.failed("a")
    breaker.failed("b")
    breaker.succeeded(0.1)  # the count is of consecutive failures
    for why in ("c", "d", "e"):
        assert breaker.allows()
        breaker.failed(why)
    assert breaker.state is breakers.State.OPEN
    assert not breaker.allows()
    clock.now += 5.0
    assert breaker.allows()  # the one probe
    assert breaker.state is breakers.State.HALF_OPEN
    assert not breaker.allows()  # only one at a time
    breaker.failed("still down")
    assert breaker.state is breakers.State.OPEN
    clock.now += 5.0
    assert breaker.allows()
    breaker.succeeded(0.1)
    assert breaker.state is breakers.State.CLOSED
    assert [change.state for change in breaker.changes] == [
        breakers.State.OPEN,
        breakers.State.HALF_OPEN,
        breakers.State.OPEN,
        breakers.State.HALF_OPEN,
        breakers.State.CLOSED,
    ]


def test_a_call_slower_than_the_latency_limit_counts_as_a_failure() -> None:
    breaker = breakers.Breaker(breakers.BreakerPolicy(1, 0.5, 5.0), clock=FakeClock())
    breaker.succeeded(0.6)
    assert breaker.state is breakers.State.OPEN
    assert "over the limit" in breaker.changes[-1].reason


def test_a_deadline_counts_down_on_its_clock_and_names_the_hop_when_it_passes() -> None:
    clock = FakeClock()
    deadline = deadlines.Deadline.after(2.0, clock=clock)
    assert deadline.remaining() == 2.0
    assert deadline.bound(5.0) == 2.0
    assert deadline.header_ms() == "2000"
    clock.now += 2.5
    with pytest.raises(errors.DeadlineExceeded, match="at step x"):
        deadline.check("step x")
    assert deadlines.NO_DEADLINE.remaining() is None


@pytest.mark.parametrize(
    ("given", "seconds"), [("2.5", 2.5), ("2500ms", 2.5), ("2s", 2.0), ("1m", 60.0)]
)
def test_a_callers_timeout_is_read_as_a_duration(given: str, seconds: float) -> None:
    assert parse_timeout(given) == seconds


@pytest.mark.parametrize("given", ["", "0", "-1s", "soon", "2h", "nan"])
def test_a_timeout_that_is_not_a_positive_duration_is_refused(given: str) -> None:
    with pytest.raises(InvalidTimeout):
        parse_timeout(given)


def test_the_time_left_header_is_milliseconds_and_never_negative() -> None:
    assert parse_time_left_ms("1500") == 1.5
    assert parse_time_left_ms("-20") == 0.0
    with pytest.raises(InvalidTimeout, match="X-Plnt-Timeout-Ms"):
        parse_time_left_ms("abc")


def test_criticality_is_read_from_its_header_with_a_default() -> None:
    assert Criticality.of_header(None) is Criticality.STANDARD
    assert Criticality.of_header(None, Criticality.SHEDDABLE) is Criticality.SHEDDABLE
    assert Criticality.of_header(" Critical ") is Criticality.CRITICAL
    with pytest.raises(ValueError, match="X-Plnt-Criticality 'urgent'"):
        Criticality.of_header("urgent")
