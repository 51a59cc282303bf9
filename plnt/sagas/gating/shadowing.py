"""Shadow traffic in the quality gate (activity side): collect the pairs, score them.

The API server mirrors live invocations the stable answered to the canary while the
shadow window is open (`spec.canary.shadow`, see `plnt.apiserver.workflowruns.shadowing`)
and answers the pairs at `GET …/workflowruns/NAME/shadow?revision=N`. `collect` reads it
again and again (backing off from `FIRST_POLL_SECONDS` to `LAST_POLL_SECONDS`,
heartbeating) and keeps the distinct pair ids (each API server replica answers its own
pairs; repeated reads through a load balancer gather them all) until it holds
`minComparisons` or `timeoutSeconds` passed. `cases_of` turns each pair into a case of the
evaluation, marked `shadow`, scored with the shadow's scorers: `expect` on both answers
(judge scorers compare the pair), or by default `agreement`, an `equals` scorer whose value
is the stable's output, on the canary's answer only. `shortfall` is the verdict when too
few pairs came: "shadow traffic: 3 of 10 comparisons in 300 s (2 dropped)".

Errors: whatever `read` raises (the client's errors, for the activity to translate).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from plnt.api import evaluations as ev
from plnt.api import shadows as wire
from plnt.sagas.gating import evaluating, scoring

FIRST_POLL_SECONDS = 0.5
LAST_POLL_SECONDS = 5.0


@dataclass(frozen=True)
class Collected:
    """The distinct pairs read (oldest first), the most drops an answer reported, the time."""

    pairs: list[wire.ShadowPair]
    dropped: int
    seconds: float


async def collect(
    read: Callable[[], Awaitable[dict[str, Any]]],
    *,
    want: int,
    timeout_seconds: float,
    beat: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Collected:
    """Read until `want` distinct pairs are held or `timeout_seconds` passed."""
    began = clock()
    held: dict[str, wire.ShadowPair] = {}
    dropped, pause = 0, FIRST_POLL_SECONDS
    while True:
        answer = wire.ShadowList.model_validate(await read())
        dropped = max(dropped, answer.dropped)
        for pair in answer.items:
            held.setdefault(pair.id, pair)
        elapsed = clock() - began
        if beat is not None:
            beat(f"shadow traffic: {len(held)} of {want} comparisons in {elapsed:.0f} s")
        if len(held) >= want or elapsed >= timeout_seconds:
            return Collected(list(held.values())[:want], dropped, elapsed)
        await sleep(min(pause, max(0.0, timeout_seconds - elapsed)))
        pause = min(pause * 2, LAST_POLL_SECONDS)


def shortfall(collected: Collected, shadow: wire.CanaryShadow) -> str | None:
    """The gate's reason when fewer than `minComparisons` pairs came; None when enough did."""
    if len(collected.pairs) >= shadow.min_comparisons:
        return None
    return (
        f"shadow traffic: {len(collected.pairs)} of {shadow.min_comparisons} comparisons"
        f" in {shadow.timeout_seconds} s ({collected.dropped} dropped)"
    )


def _answer(answer: wire.ShadowAnswer) -> tuple[ev.Answer, Any]:
    if answer.error is not None or answer.status != 200:
        error = answer.error or f"HTTP {answer.status}"
        return ev.Answer(error=error, milliseconds=answer.duration_ms), None
    kept = evaluating.kept(answer.output)
    return ev.Answer(output=kept, milliseconds=answer.duration_ms), answer.output


def scorers_of(shadow: wire.CanaryShadow, stable_output: Any) -> list[ev.Scorer]:
    """A pair's scorers: the shadow's `expect`, or `agreement` with the stable's output."""
    if shadow.expect:
        return list(shadow.expect)
    return [ev.Scorer.model_validate({"name": wire.AGREEMENT, "equals": stable_output})]


def cases_of(
    pairs: Sequence[wire.ShadowPair], shadow: wire.CanaryShadow
) -> list[evaluating.Scored]:
    """Each pair as a shadow case, its deterministic scorers applied.

    The canary's answer is held to every scorer; the stable's (the answer the caller got)
    to the shadow's own `expect` only, since `agreement` is the stable's answer itself.
    """
    found: list[evaluating.Scored] = []
    for pair in pairs:
        canary, canary_output = _answer(pair.canary)
        stable, stable_output = _answer(pair.stable)
        scorers = scorers_of(shadow, stable_output)
        canary.scores = scoring.score(scorers, canary)
        stable.scores = scoring.score(shadow.expect or [], stable)
        case = ev.EvaluationCase(name=f"shadow-{pair.id[:12]}", inputs=pair.inputs, expect=scorers)
        record = ev.CaseRecord(
            name=case.name, inputs=pair.inputs, canary=canary, stable=stable, shadow=True
        )
        found.append(evaluating.Scored(case, record, canary_output, stable_output))
    return found
