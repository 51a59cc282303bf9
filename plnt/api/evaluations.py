"""The quality gate of a canary (`spec.canary.evaluation`) and its record (`status.lastEvaluation`).

An evaluation names cases, inline (`cases`) and/or in a pinned `dataset`, each with inputs
and the scorers its output must satisfy. The deploy saga runs every case on the canary
and on the stable revision in the same window, scores both answers, and holds the canary
to per-scorer limits: an absolute `minPassRate`, a `maxRegression` against the stable's
pass rate, and for `judge` scorers a `minWinRate` of pairwise comparisons. Checks that
need no I/O (a regex that compiles, a JSON Schema that is one, a JSON Pointer that
parses, exactly one check per scorer) are made here, so a bad gate is a 422 naming the
field, not a failed deploy.

No I/O here.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import jsonpointer
import jsonschema
import jsonschema.validators
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from plnt.api.base import WireModel

MAX_CASES = 200
"""Inline cases, and cases a dataset may hold."""
MAX_SCORERS = 16
"""Scorers on one case."""
MAX_DATASET_BYTES = 4 * 1024 * 1024
"""A dataset's size: it is read whole by the worker."""
DEFAULT_MIN_PASS_RATE = 1.0
"""Without limits, every check must pass on the canary, as a smoke case's does."""
DEFAULT_MIN_WIN_RATE = 0.5
"""Without a limit, a judge must find the canary no worse than the stable (ties halved)."""
CHECKS = ("contains", "regex", "jsonSchema", "equals", "judge", "trajectory")
"""The scorer types, by their field names on the wire."""
NAME_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"

ScorerType = Literal["contains", "regex", "jsonSchema", "equals", "judge", "trajectory"]
Outcome = Literal["canary", "stable", "tie"]


def _invalid(message: str, **context: Any) -> PydanticCustomError:
    return PydanticCustomError("FieldValueInvalid", "Invalid value: " + message, context)


class JudgeSpec(WireModel):
    """A model asked which of two answers to the same input is better, under a rubric."""

    backend: str = Field(min_length=1, description="The PlntBackend that serves the judge model.")
    model: str | None = Field(
        default=None, description="Model to ask (default: the backend's first model)."
    )
    rubric: str = Field(
        min_length=1,
        max_length=4000,
        description="What makes an answer better, as the judge is told.",
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="The judge's sampling.")
    max_tokens: int = Field(default=16, ge=1, le=1024, description="Tokens the judge may answer.")


class TrajectoryCheck(WireModel):
    """How an agent reached its answer, read from the invocation's trace: how often a tool
    was called, how many turns its loop took, how many calls were invalid. Every bound
    given must hold."""

    step: str | None = Field(
        default=None, description="Only this step's turns and calls (default: every step)."
    )
    tool: str | None = Field(
        default=None, description="The tool minCalls and maxCalls count (default: every tool)."
    )
    min_calls: int | None = Field(default=None, ge=0, description="Calls of `tool`, at least.")
    max_calls: int | None = Field(default=None, ge=0, description="Calls of `tool`, at most.")
    max_turns: int | None = Field(
        default=None, ge=1, description="Model turns of the step's (or every step's) loop, at most."
    )
    max_invalid_calls: int | None = Field(
        default=None, ge=0, description="Calls refused for invalid arguments, at most."
    )

    @model_validator(mode="after")
    def _some_bound(self) -> TrajectoryCheck:
        bounds = (self.min_calls, self.max_calls, self.max_turns, self.max_invalid_calls)
        if all(bound is None for bound in bounds):
            raise _invalid("give at least one of minCalls, maxCalls, maxTurns, maxInvalidCalls")
        low, high = self.min_calls, self.max_calls
        if low is not None and high is not None and low > high:
            raise _invalid("minCalls is larger than maxCalls")
        return self


class Scorer(WireModel):
    """One check on a case's output: exactly one of contains, regex, jsonSchema, equals, judge,
    trajectory (the last reads the invocation's trace, not its output).

    `path` (a JSON Pointer, RFC 6901) selects part of the output first; an output that is
    a string holding JSON is parsed for it (models answer JSON as text).
    """

    name: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="What limits and the record call it (default: its type, e.g. contains).",
    )
    path: str | None = Field(
        default=None, description='JSON Pointer into the output ("/answer/0"); default: all.'
    )
    contains: str | None = Field(default=None, description="The value (as text) holds this.")
    regex: str | None = Field(
        default=None, max_length=1000, description="The value (as text) matches (re.search)."
    )
    json_schema: dict[str, Any] | None = Field(
        default=None, description="The value validates against this JSON Schema."
    )
    equals: Any = Field(default=None, description="The value equals this JSON value.")
    judge: JudgeSpec | None = Field(
        default=None, description="A model compares the canary's answer with the stable's."
    )
    trajectory: TrajectoryCheck | None = Field(
        default=None, description="Tool calls and turns, from the trace, are within bounds."
    )

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                jsonpointer.JsonPointer(value)
            except jsonpointer.JsonPointerException as error:
                raise _invalid(
                    '"{value}": not a JSON Pointer: {error}', value=value, error=str(error)
                ) from None
        return value

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise _invalid('"{value}": {error}', value=value, error=str(error)) from None
        return value

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            validator = jsonschema.validators.validator_for(
                value, default=jsonschema.Draft202012Validator
            )
            try:
                validator.check_schema(value)
            except jsonschema.SchemaError as error:
                raise _invalid("not a JSON Schema: {error}", error=error.message) from None
        return value

    @model_validator(mode="after")
    def _one_check(self) -> Scorer:
        given = [name for name in CHECKS if self._has(name)]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise _invalid(
                "give exactly one of contains, regex, jsonSchema, equals, judge, trajectory"
                " (found: {found})",
                found=found,
            )
        if self.judge is not None and self.path is not None:
            raise _invalid("path: a judge reads the whole answer")
        if self.trajectory is not None and self.path is not None:
            raise _invalid("path: a trajectory is read from the trace, not the output")
        return self

    def _has(self, check: str) -> bool:
        if check == "equals":
            return "equals" in self.model_fields_set
        field = "json_schema" if check == "jsonSchema" else check
        return getattr(self, field) is not None

    @property
    def type(self) -> ScorerType:
        for check in CHECKS:
            if self._has(check):
                return check  # type: ignore[return-value]
        raise AssertionError("validated: exactly one check")

    @property
    def key(self) -> str:
        """The scorer's name in limits and in the record."""
        return self.name or self.type


class EvaluationCase(WireModel):
    """One input run on the canary and the stable, and the scorers of its output."""

    name: str = Field(pattern=NAME_PATTERN, description="The case's name in the record.")
    inputs: dict[str, Any] = Field(default_factory=dict, description="The workflow's inputs.")
    expect: list[Scorer] = Field(
        default_factory=list, max_length=MAX_SCORERS, description="Scorers of the output."
    )


class EvaluationDataset(WireModel):
    """Cases kept beside the spec, pinned the same way: a reference and its sha256.

    The document is YAML or JSON (a list of cases, or `{cases: [...]}`) or JSON Lines (one
    case per line), each case as in `spec.canary.evaluation.cases`.
    """

    ref: str = Field(
        min_length=1,
        description="oci://host[:port]/repo:tag, s3://bucket/key, or oci-layout:PATH:TAG.",
    )
    digest: str = Field(
        pattern=r"^sha256:[0-9a-f]{64}$",
        description="sha256:<64 hex> of the dataset's exact bytes; anything else is refused.",
    )


class ScorerLimits(WireModel):
    """Limits of one scorer (by name), overriding the evaluation's own."""

    min_pass_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    max_regression: float | None = Field(default=None, ge=0.0, le=1.0)
    min_win_rate: float | None = Field(default=None, ge=0.0, le=1.0)


class CanaryEvaluation(WireModel):
    """The quality gate: cases run on the canary and the stable in one window, then scored.

    Limits per scorer: `minPassRate` (the canary's share of passed checks, absolute),
    `maxRegression` (how far the canary's pass rate may fall below the stable's; not
    applied on a first deploy, which has no stable) and, for judge scorers, `minWinRate`
    (wins plus half the ties). `limits` overrides them per scorer name.
    """

    cases: list[EvaluationCase] = Field(
        default_factory=list, max_length=MAX_CASES, description="Inline cases."
    )
    dataset: EvaluationDataset | None = Field(
        default=None, description="More cases from a pinned document."
    )
    min_pass_rate: float = Field(
        default=DEFAULT_MIN_PASS_RATE,
        ge=0.0,
        le=1.0,
        description="Smallest share of passed checks per scorer on the canary (default 1).",
    )
    max_regression: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Largest drop of a scorer's pass rate below the stable's (default: none).",
    )
    min_win_rate: float = Field(
        default=DEFAULT_MIN_WIN_RATE,
        ge=0.0,
        le=1.0,
        description="Judge scorers: smallest share of wins, ties halved (default 0.5).",
    )
    limits: dict[str, ScorerLimits] = Field(
        default_factory=dict, description="Limits of one scorer, by its name."
    )

    @field_validator("cases")
    @classmethod
    def _unique(cls, value: list[EvaluationCase]) -> list[EvaluationCase]:
        seen: set[str] = set()
        for case in value:
            if case.name in seen:
                raise _invalid('duplicate case name "{name}"', name=case.name)
            seen.add(case.name)
        return value

    @model_validator(mode="after")
    def _some_cases(self) -> CanaryEvaluation:
        if not self.cases and self.dataset is None:
            raise _invalid("give cases, a dataset, or both")
        return self


# -- the record: status.lastEvaluation ---------------------------------------------------


class Score(WireModel):
    """One scorer's check of one answer."""

    scorer: str
    passed: bool
    detail: str = Field(default="", description="Why it failed (empty when it passed).")


class StepTrajectory(WireModel):
    """One tool-loop step of an invocation, as its trace tells it."""

    turns: int = Field(default=0, description="Model turns the loop took.")
    tool_calls: dict[str, int] = Field(default_factory=dict, description="Calls, by tool name.")
    invalid_tool_calls: int = Field(default=0, description="Calls refused before running.")


def trajectory_of(trace: Any) -> dict[str, StepTrajectory]:
    """The tool-loop steps of an invocation's trace (the runner's `trace` entries with
    `turns`), by step id; anything malformed is left out."""
    found: dict[str, StepTrajectory] = {}
    for entry in trace if isinstance(trace, list) else []:
        turns = entry.get("turns") if isinstance(entry, dict) else None
        if not isinstance(turns, list) or not isinstance(entry.get("id"), str):
            continue
        calls: dict[str, int] = {}
        invalid = 0
        for turn in turns:
            for call in turn.get("toolCalls", []) if isinstance(turn, dict) else []:
                if isinstance(call, dict) and isinstance(call.get("name"), str):
                    calls[call["name"]] = calls.get(call["name"], 0) + 1
                    invalid += bool(call.get("invalid"))
        found[entry["id"]] = StepTrajectory(
            turns=len(turns), tool_calls=calls, invalid_tool_calls=invalid
        )
    return found


class Answer(WireModel):
    """What one revision answered to one case, and how the scorers found it."""

    output: Any = Field(default=None, description="The output (long text is cut).")
    error: str | None = Field(default=None, description="Why there is no output.")
    trajectory: dict[str, StepTrajectory] | None = Field(
        default=None,
        description="The tool-loop steps, by id, from the trace (None: no trace was seen).",
    )
    milliseconds: float = 0.0
    scores: list[Score] = Field(default_factory=list)


class Judgement(WireModel):
    """A judge's verdict on one case: asked twice, the order swapped; a disagreement ties."""

    scorer: str
    canary_first: Outcome = Field(
        description="Its preference with the canary's answer shown first."
    )
    stable_first: Outcome = Field(
        description="Its preference with the stable's answer shown first."
    )
    outcome: Outcome


class CaseRecord(WireModel):
    name: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    canary: Answer
    stable: Answer | None = None
    judgements: list[Judgement] = Field(default_factory=list)
    shadow: bool | None = Field(
        default=None, description="A live invocation mirrored to the canary (spec.canary.shadow)."
    )


class ScorerVerdict(WireModel):
    """One scorer's numbers against its limits, the canary's beside the stable's."""

    name: str
    type: ScorerType
    checks: int = Field(description="Answers scored (judge: cases compared).")
    canary_pass_rate: float | None = None
    stable_pass_rate: float | None = None
    regression: float | None = Field(default=None, description="stable - canary pass rate.")
    min_pass_rate: float | None = None
    max_regression: float | None = None
    win_rate: float | None = None
    min_win_rate: float | None = None
    wins: int | None = None
    ties: int | None = None
    losses: int | None = None
    passed: bool
    message: str


class JudgeRecord(WireModel):
    """Who judged: recorded with the verdict."""

    scorer: str
    backend: str
    model: str | None = None
    rubric: str
    temperature: float


class EvaluationRecord(WireModel):
    """The last quality gate: every number against its limit and the stable's."""

    revision: int | None = None
    stable_revision: int | None = None
    time: str | None = None
    passed: bool
    message: str
    dataset: EvaluationDataset | None = None
    duration_milliseconds: float | None = None
    scorers: list[ScorerVerdict] = Field(default_factory=list)
    judges: list[JudgeRecord] = Field(default_factory=list)
    cases: list[CaseRecord] = Field(default_factory=list)
    shadow_comparisons: int | None = Field(
        default=None, description="Shadow pairs scored (spec.canary.shadow)."
    )
    shadow_dropped: int | None = Field(
        default=None, description="Mirrored calls the API servers dropped (queue full)."
    )
