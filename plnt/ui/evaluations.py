"""What the Run page's quality gate card shows of `status.lastEvaluation`
(`plnt.api.evaluations.EvaluationRecord`): each scorer's numbers against its limits, who
judged, and each case's answers, canary beside stable.

No I/O, no HTML. Every optional number of the record is None here when the record left it
out: a scorer gated by `minPassRate` alone has no `maxRegression` (the documented default
is none), and the card prints a limit exactly when the scorer has one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from plnt.ui import views


@dataclass(frozen=True, slots=True)
class ScorerRow:
    """One scorer's verdict: the canary's numbers, the stable's, and the limits it had."""

    name: str
    type: str
    passed: bool
    canary_pass_rate: float | None
    stable_pass_rate: float | None
    min_pass_rate: float | None
    max_regression: float | None
    win_rate: float | None
    min_win_rate: float | None
    wins: int | None
    ties: int | None
    losses: int | None

    @property
    def judge(self) -> bool:
        return self.type == "judge"


@dataclass(frozen=True, slots=True)
class JudgeRow:
    """Who judged a judge scorer's comparisons."""

    scorer: str
    backend: str
    model: str | None
    rubric: str
    temperature: float | None


@dataclass(frozen=True, slots=True)
class ScoreMark:
    """One scorer's check of one answer."""

    scorer: str
    passed: bool
    detail: str


@dataclass(frozen=True, slots=True)
class AnswerCell:
    """What one revision answered to a case: its error, else its output as text."""

    text: str
    scores: tuple[ScoreMark, ...]


@dataclass(frozen=True, slots=True)
class JudgementMark:
    scorer: str
    outcome: str


@dataclass(frozen=True, slots=True)
class CaseRow:
    name: str
    judgements: tuple[JudgementMark, ...]
    canary: AnswerCell | None
    stable: AnswerCell | None
    """None on a first deploy (no stable to ask)."""


@dataclass(frozen=True, slots=True)
class EvaluationView:
    """The last quality gate, as the card lays it out."""

    passed: bool
    message: str
    revision: int | None
    stable_revision: int | None
    """None on a first deploy: absolute limits only."""
    duration_seconds: float | None
    scorers: tuple[ScorerRow, ...]
    judges: tuple[JudgeRow, ...]
    cases: tuple[CaseRow, ...]


def _objects(value: Any) -> Iterable[Mapping[str, Any]]:
    """The JSON objects of a list field (none when it is left out)."""
    return (item for item in value or () if isinstance(item, Mapping))


def scorer_row(verdict: Mapping[str, Any]) -> ScorerRow:
    return ScorerRow(
        name=str(verdict.get("name") or ""),
        type=str(verdict.get("type") or ""),
        passed=bool(verdict.get("passed")),
        canary_pass_rate=views.number(verdict.get("canaryPassRate")),
        stable_pass_rate=views.number(verdict.get("stablePassRate")),
        min_pass_rate=views.number(verdict.get("minPassRate")),
        max_regression=views.number(verdict.get("maxRegression")),
        win_rate=views.number(verdict.get("winRate")),
        min_win_rate=views.number(verdict.get("minWinRate")),
        wins=views.integer(verdict.get("wins")),
        ties=views.integer(verdict.get("ties")),
        losses=views.integer(verdict.get("losses")),
    )


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, sort_keys=True)


def answer_cell(answer: Any) -> AnswerCell | None:
    if not isinstance(answer, Mapping):
        return None
    error = answer.get("error")
    return AnswerCell(
        text=str(error) if error else _output_text(answer.get("output")),
        scores=tuple(
            ScoreMark(
                scorer=str(score.get("scorer") or ""),
                passed=bool(score.get("passed")),
                detail=str(score.get("detail") or ""),
            )
            for score in _objects(answer.get("scores"))
        ),
    )


def case_row(case: Mapping[str, Any]) -> CaseRow:
    return CaseRow(
        name=str(case.get("name") or ""),
        judgements=tuple(
            JudgementMark(scorer=str(j.get("scorer") or ""), outcome=str(j.get("outcome") or ""))
            for j in _objects(case.get("judgements"))
        ),
        canary=answer_cell(case.get("canary")),
        stable=answer_cell(case.get("stable")),
    )


def evaluation_view(record: Any) -> EvaluationView | None:
    """`status.lastEvaluation` for the card; None when no gate has run."""
    if not isinstance(record, Mapping) or not record:
        return None
    milliseconds = views.number(record.get("durationMilliseconds"))
    return EvaluationView(
        passed=bool(record.get("passed")),
        message=str(record.get("message") or ""),
        revision=views.integer(record.get("revision")),
        stable_revision=views.integer(record.get("stableRevision")),
        duration_seconds=None if milliseconds is None else round(milliseconds / 1000, 1),
        scorers=tuple(scorer_row(v) for v in _objects(record.get("scorers"))),
        judges=tuple(
            JudgeRow(
                scorer=str(j.get("scorer") or ""),
                backend=str(j.get("backend") or ""),
                model=None if j.get("model") is None else str(j["model"]),
                rubric=str(j.get("rubric") or ""),
                temperature=views.number(j.get("temperature")),
            )
            for j in _objects(record.get("judges"))
        ),
        cases=tuple(case_row(c) for c in _objects(record.get("cases"))),
    )
