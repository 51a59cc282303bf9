"""Scoring a canary's answers against the stable's: the checks, the rates and the limits.

Pure functions, no I/O, so the quality gate's arithmetic is tested exhaustively without a
runner or a model (`tests/sagas/test_scoring.py`). `check` scores one value with one
deterministic scorer; `verdicts` turns the scored cases into one `ScorerVerdict` per
scorer name, each stating its numbers against its limits and the stable's, and
`summary` the message conditions and Events carry.

A pass rate is the share of a scorer's checks that passed on one revision. A
`maxRegression` compares it with the stable's (stable - canary); with no stable (a first
deploy) only the absolute limits apply. A judge's win rate is wins plus half the ties
over the cases it compared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonpointer

from plnt.api import evaluations as ev
from plnt.workflowspec import jsonschemas
from plnt.workflowspec.smoke import as_text


@dataclass(frozen=True)
class Check:
    """One scorer's finding on one value: passed, or why not."""

    passed: bool
    detail: str = ""


def select(output: Any, path: str | None) -> tuple[bool, Any]:
    """(found, value) at JSON Pointer `path` in `output`; a string holding JSON is parsed.

    No path (or "") is the whole output, as it is.
    """
    if not path:
        return True, output
    if isinstance(output, str):
        try:
            output = json.loads(output)
        except ValueError:
            return False, None
    try:
        return True, jsonpointer.resolve_pointer(output, path)
    except jsonpointer.JsonPointerException:
        return False, None


def _parsed(value: Any) -> Any:
    """A string holding a JSON object or array is read as it; anything else stays."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _short(value: Any, limit: int = 80) -> str:
    text = as_text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check(scorer: ev.Scorer, output: Any) -> Check:
    """Score `output` with one deterministic scorer (not `judge`, which compares two)."""
    found, value = select(output, scorer.path)
    if not found:
        return Check(False, f"no value at {scorer.path}")
    kind = scorer.type
    if kind == "contains":
        assert scorer.contains is not None
        if scorer.contains in as_text(value):
            return Check(True)
        return Check(False, f"{_short(value)!r} does not contain {scorer.contains!r}")
    if kind == "regex":
        assert scorer.regex is not None
        if re.search(scorer.regex, as_text(value)):
            return Check(True)
        return Check(False, f"{_short(value)!r} does not match /{scorer.regex}/")
    if kind == "equals":
        if value == scorer.equals:
            return Check(True)
        return Check(False, f"{_short(value)!r} does not equal {_short(scorer.equals)!r}")
    if kind == "jsonSchema":
        assert scorer.json_schema is not None
        value = _parsed(value)
        errors = list(jsonschemas.validator(scorer.json_schema).iter_errors(value))
        if not errors:
            return Check(True)
        first = errors[0]
        where = "".join(f"/{part}" for part in first.absolute_path)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return Check(False, f"{where or '/'}: {first.message}{more}")
    raise ValueError(f"{kind} is not a deterministic scorer")


def check_trajectory(
    bounds: ev.TrajectoryCheck, trajectory: dict[str, ev.StepTrajectory] | None
) -> Check:
    """Hold an answer's trajectory (its tool-loop steps) to a trajectory scorer's bounds."""
    if trajectory is None:
        return Check(False, "no trace to read the trajectory from")
    if bounds.step is not None:
        if bounds.step not in trajectory:
            return Check(False, f"step {bounds.step!r} ran no tool loop")
        steps = [trajectory[bounds.step]]
    else:
        steps = list(trajectory.values())
    calls = sum(
        count
        for step in steps
        for name, count in step.tool_calls.items()
        if bounds.tool is None or name == bounds.tool
    )
    turns = sum(step.turns for step in steps)
    invalid = sum(step.invalid_tool_calls for step in steps)
    what = f"calls of {bounds.tool!r}" if bounds.tool else "tool calls"
    problems = []
    if bounds.min_calls is not None and calls < bounds.min_calls:
        problems.append(f"{calls} {what} < min {bounds.min_calls}")
    if bounds.max_calls is not None and calls > bounds.max_calls:
        problems.append(f"{calls} {what} > max {bounds.max_calls}")
    if bounds.max_turns is not None and turns > bounds.max_turns:
        problems.append(f"{turns} turns > max {bounds.max_turns}")
    if bounds.max_invalid_calls is not None and invalid > bounds.max_invalid_calls:
        problems.append(f"{invalid} invalid calls > max {bounds.max_invalid_calls}")
    return Check(not problems, "; ".join(problems))


def score(scorers: Sequence[ev.Scorer], answer: ev.Answer) -> list[ev.Score]:
    """Every deterministic scorer's check of one answer; an answer with an error fails all."""
    scores: list[ev.Score] = []
    for scorer in scorers:
        if scorer.type == "judge":
            continue
        if answer.error is not None:
            scores.append(ev.Score(scorer=scorer.key, passed=False, detail=answer.error))
            continue
        if scorer.trajectory is not None:
            found = check_trajectory(scorer.trajectory, answer.trajectory)
        else:
            found = check(scorer, answer.output)
        scores.append(ev.Score(scorer=scorer.key, passed=found.passed, detail=found.detail))
    return scores


def judged(canary_first: ev.Outcome, stable_first: ev.Outcome) -> ev.Outcome:
    """Two answers of the judge, the order swapped: agreeing answers stand, else a tie."""
    return canary_first if canary_first == stable_first else "tie"


# -- rates and limits --------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """One scorer's effective limits."""

    min_pass_rate: float | None
    max_regression: float | None
    min_win_rate: float | None


def limits_of(evaluation: ev.CanaryEvaluation, name: str) -> Limits:
    """A scorer's limits: its entry in `limits`, else the evaluation's own."""
    own = evaluation.limits.get(name) or ev.ScorerLimits()
    return Limits(
        min_pass_rate=own.min_pass_rate
        if own.min_pass_rate is not None
        else evaluation.min_pass_rate,
        max_regression=own.max_regression
        if own.max_regression is not None
        else evaluation.max_regression,
        min_win_rate=own.min_win_rate if own.min_win_rate is not None else evaluation.min_win_rate,
    )


def rate(scores: Iterable[ev.Score], name: str) -> tuple[int, int]:
    """(passed, checks) of scorer `name` among `scores`."""
    mine = [s for s in scores if s.scorer == name]
    return sum(1 for s in mine if s.passed), len(mine)


def _ratio(value: float) -> str:
    return f"{value:.2f}"


def pass_verdict(
    name: str,
    kind: ev.ScorerType,
    canary: tuple[int, int],
    stable: tuple[int, int] | None,
    limits: Limits,
) -> ev.ScorerVerdict:
    """A deterministic scorer's verdict: its pass rates against `minPassRate` and
    `maxRegression` ("contains pass rate 0.00 < min 1.00; stable 1.00")."""
    passed, checks = canary
    canary_rate = passed / checks if checks else 0.0
    stable_rate = stable[0] / stable[1] if stable is not None and stable[1] else None
    regression = stable_rate - canary_rate if stable_rate is not None else None
    ok, parts = True, []
    if limits.min_pass_rate is not None:
        good = checks > 0 and canary_rate >= limits.min_pass_rate
        ok &= good
        op = ">=" if good else "<"
        parts.append(f"pass rate {_ratio(canary_rate)} {op} min {_ratio(limits.min_pass_rate)}")
    else:
        parts.append(f"pass rate {_ratio(canary_rate)}")
    if stable_rate is not None:
        parts[-1] += f"; stable {_ratio(stable_rate)}"
    if limits.max_regression is not None and regression is not None:
        good = regression <= limits.max_regression + 1e-9
        ok &= good
        op = "<=" if good else ">"
        parts.append(f"regression {_ratio(regression)} {op} max {_ratio(limits.max_regression)}")
    return ev.ScorerVerdict(
        name=name,
        type=kind,
        checks=checks,
        canary_pass_rate=canary_rate,
        stable_pass_rate=stable_rate,
        regression=regression,
        min_pass_rate=limits.min_pass_rate,
        max_regression=limits.max_regression if stable is not None else None,
        passed=ok,
        message=f"{name} " + ", ".join(parts) + f" ({passed}/{checks})",
    )


def win_verdict(name: str, outcomes: Sequence[ev.Outcome], limits: Limits) -> ev.ScorerVerdict:
    """A judge's verdict: the canary's win rate (ties halved) against `minWinRate`."""
    wins = sum(1 for o in outcomes if o == "canary")
    ties = sum(1 for o in outcomes if o == "tie")
    losses = len(outcomes) - wins - ties
    win_rate = (wins + ties / 2) / len(outcomes) if outcomes else 0.0
    limit = limits.min_win_rate
    ok = bool(outcomes) and (limit is None or win_rate >= limit)
    text = f"{name} win rate {_ratio(win_rate)}"
    if limit is not None:
        text += f" {'>=' if ok else '<'} min {_ratio(limit)}"
    text += f" ({wins} won, {ties} tied, {losses} lost)"
    return ev.ScorerVerdict(
        name=name,
        type="judge",
        checks=len(outcomes),
        win_rate=win_rate,
        min_win_rate=limit,
        wins=wins,
        ties=ties,
        losses=losses,
        passed=ok,
        message=text,
    )


def scorer_types(cases: Iterable[ev.EvaluationCase]) -> dict[str, ev.ScorerType]:
    """Every scorer name the cases use, with its type, in order of first use."""
    found: dict[str, ev.ScorerType] = {}
    for case in cases:
        for scorer in case.expect:
            found.setdefault(scorer.key, scorer.type)
    return found


def verdicts(
    evaluation: ev.CanaryEvaluation,
    cases: Sequence[ev.EvaluationCase],
    records: Sequence[ev.CaseRecord],
    *,
    has_stable: bool,
) -> list[ev.ScorerVerdict]:
    """One verdict per scorer name over every scored case, in order of first use.

    Judge scorers are left out without a stable: there is nothing to compare with.
    """
    found: list[ev.ScorerVerdict] = []
    for name, kind in scorer_types(cases).items():
        limits = limits_of(evaluation, name)
        if kind == "judge":
            if has_stable:
                outcomes = [j.outcome for r in records for j in r.judgements if j.scorer == name]
                found.append(win_verdict(name, outcomes, limits))
            continue
        canary = rate((s for r in records for s in r.canary.scores), name)
        stable = None
        if has_stable:
            stable = rate((s for r in records if r.stable for s in r.stable.scores), name)
        found.append(pass_verdict(name, kind, canary, stable, limits))
    return found


def summary(found: Sequence[ev.ScorerVerdict], *, cases: int, has_stable: bool) -> str:
    """The message of conditions and Events: every failed scorer first, or every number."""
    failed = [v.message for v in found if not v.passed]
    if failed:
        return "evaluation failed: " + "; ".join(failed)
    against = "" if has_stable else " (no stable: absolute limits only)"
    numbers = "; ".join(v.message for v in found) or "no scorers"
    return f"evaluation passed: {cases} case(s){against}, {numbers}"
