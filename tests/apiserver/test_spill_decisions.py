"""When a run's calls spill to another backend of its pool, and when they return
(`plnt.apiserver.workflowruns.spilling.decide`, pure): judged on the primary's own calls,
the pool's probed TTFTs and, for the return, a probe of the primary made after the spill."""

from __future__ import annotations

from plnt.apiserver.workflowruns import attainment
from plnt.apiserver.workflowruns.spilling import Candidate, Objective, RunSpill, decide

TTFT = Objective("timeToFirstToken", percentile=90, milliseconds=300, window_seconds=3600)
NOW = 10_000.0


def call(at: float, first_token_ms: float, *, spilled_to: str | None = None) -> attainment.Call:
    return attainment.Call(
        at=at,
        revision=1,
        error=False,
        latency_ms=first_token_ms + 50,
        first_token_ms=first_token_ms,
        per_token_ms=None,
        input_tokens=1,
        output_tokens=2,
        spilled_to=spilled_to,
    )


PRIMARY = Candidate("primary", ttft_ms=900, reachable=True, probed_at=NOW - 5)
FAST = Candidate("fast", ttft_ms=40, reachable=True, probed_at=NOW - 5)
FASTER_BUT_DOWN = Candidate("down", ttft_ms=5, reachable=False, probed_at=NOW - 5)
SLOW = Candidate("slow", ttft_ms=700, reachable=True, probed_at=NOW - 5)
SLOW_CALLS = [call(NOW - 3, 900), call(NOW - 2, 950), call(NOW - 1, 1000)]


def test_a_primary_missing_its_objective_spills_to_the_pools_fastest_backend_that_meets_it() -> (
    None
):
    decision = decide(
        RunSpill(),
        objective=TTFT,
        pool="p",
        primary=PRIMARY,
        candidates=[SLOW, FASTER_BUT_DOWN, FAST],
        calls=SLOW_CALLS,
        now=NOW,
    )
    assert decision.target == "fast"
    assert decision.event is not None and decision.event.reason == "SpillingOver"
    assert decision.event.type == "Warning"
    message = decision.event.message
    assert "timeToFirstToken attainment 0% of 3 calls on primary" in message
    assert "objective 300 ms at p90" in message and "fast of pool p (TTFT 40 ms)" in message


def test_too_few_calls_a_met_objective_or_nothing_that_meets_it_keep_the_primary() -> None:
    def target(calls: list[attainment.Call], candidates: list[Candidate]) -> str | None:
        decision = decide(
            RunSpill(),
            objective=TTFT,
            pool="p",
            primary=PRIMARY,
            candidates=candidates,
            calls=calls,
            now=NOW,
        )
        assert decision.event is None
        return decision.target

    assert target(SLOW_CALLS[:2], [FAST]) is None
    fine = [call(NOW - 4 + i, 100) for i in range(9)] + [call(NOW, 900)]
    assert target(fine, [FAST]) is None  # 90% within: the objective is met
    assert target(SLOW_CALLS, [SLOW, FASTER_BUT_DOWN]) is None


def test_calls_before_the_last_change_and_spilled_calls_do_not_judge_the_primary() -> None:
    spilled = [call(NOW - 1, 900, spilled_to="fast") for _ in range(5)]
    state = RunSpill(target=None, since=NOW - 1.5)
    decision = decide(
        state,
        objective=TTFT,
        pool="p",
        primary=PRIMARY,
        candidates=[FAST],
        calls=SLOW_CALLS + spilled,
        now=NOW,
    )
    assert decision.target is None  # one slow primary call since the return, none spilled


def test_spilling_goes_on_until_a_probe_after_the_spill_finds_the_primary_meeting_it() -> None:
    state = RunSpill(target="fast", since=NOW - 10)
    recovered_before = Candidate("primary", ttft_ms=30, reachable=True, probed_at=NOW - 11)
    recovered = Candidate("primary", ttft_ms=30, reachable=True, probed_at=NOW - 1)

    def decided(primary: Candidate) -> tuple[str | None, str | None]:
        decision = decide(
            state,
            objective=TTFT,
            pool="p",
            primary=primary,
            candidates=[FAST],
            calls=SLOW_CALLS,
            now=NOW,
        )
        return decision.target, decision.event.reason if decision.event else None

    assert decided(PRIMARY) == ("fast", None)
    assert decided(recovered_before) == ("fast", None)  # that probe predates the spill
    assert decided(recovered) == (None, "SpillOverEnded")


def test_a_spill_target_that_stops_meeting_it_is_replaced_or_the_calls_return() -> None:
    state = RunSpill(target="fast", since=NOW - 10)
    fast_now_slow = Candidate("fast", ttft_ms=800, reachable=True, probed_at=NOW - 1)
    other = Candidate("other", ttft_ms=60, reachable=True, probed_at=NOW - 1)
    moved = decide(
        state,
        objective=TTFT,
        pool="p",
        primary=PRIMARY,
        candidates=[fast_now_slow, other],
        calls=[],
        now=NOW,
    )
    assert moved.target == "other" and moved.event is not None
    assert moved.event.reason == "SpillingOver" and "fast no longer meets" in moved.event.message
    back = decide(
        state,
        objective=TTFT,
        pool="p",
        primary=PRIMARY,
        candidates=[fast_now_slow],
        calls=[],
        now=NOW,
    )
    assert back.target is None and back.event is not None
    assert back.event.reason == "SpillOverEnded" and "no backend of pool p" in back.event.message
