"""The quality gate's shadow comparisons: collecting pairs (a fake clock) and scoring them."""

from __future__ import annotations

from typing import Any

from plnt.api import evaluations as ev
from plnt.api import shadows as wire
from plnt.sagas.gating import evaluating, shadowing


def pair(n: int, canary: Any = "x", stable: Any = "x", status: int = 200) -> dict[str, Any]:
    answer: dict[str, Any] = {"revision": 2, "status": status, "durationMs": 5.0}
    answer.update({"output": canary} if status == 200 else {"error": "HTTP 500: boom"})
    return {
        "id": f"id{n}",
        "time": "2024-01-01T00:00:00Z",
        "inputs": {"question": str(n)},
        "stable": {"revision": 1, "status": 200, "output": stable, "durationMs": 3.0},
        "canary": answer,
    }


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_pairs_are_collected_by_distinct_id_until_enough_have_come() -> None:
    answers = [[pair(1)], [pair(1), pair(2)], [pair(2), pair(3)]]  # two replicas' views
    clock = Clock()

    async def read() -> dict[str, Any]:
        return {"items": answers.pop(0) if answers else [], "dropped": 1}

    found = await shadowing.collect(
        read, want=3, timeout_seconds=60, clock=clock, sleep=clock.sleep
    )
    assert [p.id for p in found.pairs] == ["id1", "id2", "id3"] and found.dropped == 1
    assert clock.slept == [0.5, 1.0]  # backing off between reads


async def test_too_few_pairs_by_the_deadline_give_the_reason_with_the_drops() -> None:
    clock = Clock()

    async def read() -> dict[str, Any]:
        return {"items": [pair(1), pair(2), pair(3)], "dropped": 2}

    found = await shadowing.collect(
        read, want=10, timeout_seconds=300, clock=clock, sleep=clock.sleep
    )
    assert len(found.pairs) == 3 and clock.now == 300
    assert max(clock.slept) == shadowing.LAST_POLL_SECONDS
    shadow = wire.CanaryShadow(percent=50)
    assert shadowing.shortfall(found, shadow) == (
        "shadow traffic: 3 of 10 comparisons in 300 s (2 dropped)"
    )
    enough = wire.CanaryShadow(percent=50, min_comparisons=3)
    assert shadowing.shortfall(found, enough) is None


def test_by_default_a_pair_agrees_when_the_canary_answers_what_the_stable_did() -> None:
    pairs = [
        wire.ShadowPair.model_validate(p)
        for p in (pair(1), pair(2, canary="y"), pair(3, status=500))
    ]
    scored = shadowing.cases_of(pairs, wire.CanaryShadow(percent=10))
    assert [s.record.canary.scores[0].passed for s in scored] == [True, False, False]
    assert all(s.record.shadow and s.record.stable is not None for s in scored)
    assert scored[0].record.stable is not None and scored[0].record.stable.scores == []
    assert [s.case.expect[0].key for s in scored] == [wire.AGREEMENT] * 3


def test_the_shadows_own_scorers_hold_both_answers() -> None:
    shadow = wire.CanaryShadow.model_validate({"percent": 10, "expect": [{"regex": "^x"}]})
    (scored,) = shadowing.cases_of([wire.ShadowPair.model_validate(pair(1, canary="yx"))], shadow)
    assert scored.record.canary.scores[0].passed is False
    assert scored.record.stable is not None and scored.record.stable.scores[0].passed is True


async def test_shadow_comparisons_join_the_cases_and_a_shortfall_fails_the_gate() -> None:
    evaluation = ev.CanaryEvaluation.model_validate(
        {"cases": [{"name": "c", "expect": [{"contains": "x"}]}]}
    )
    scored = shadowing.cases_of(
        [wire.ShadowPair.model_validate(pair(n)) for n in range(3)], wire.CanaryShadow(percent=10)
    )
    passed = await evaluating.evaluate(
        None,  # type: ignore[arg-type]  # no case to run: only shadow pairs
        evaluation, [], canary=["http://c"], stable=["http://s"], scored=scored,
    )  # fmt: skip
    assert passed.passed, passed.message
    assert (
        "3 shadow comparison(s)" in passed.message and "agreement pass rate 1.00" in passed.message
    )
    failed = await evaluating.evaluate(
        None,  # type: ignore[arg-type]
        evaluation, [], canary=["http://c"], stable=["http://s"], scored=scored,
        shortfall="shadow traffic: 3 of 10 comparisons in 300 s (0 dropped)",
    )  # fmt: skip
    assert not failed.passed
    assert failed.message.startswith(
        "evaluation failed: shadow traffic: 3 of 10 comparisons in 300 s (0 dropped); "
    )
    assert sum(1 for c in failed.cases if c.shadow) == 3
