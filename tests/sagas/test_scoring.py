"""The quality gate's arithmetic: each scorer on its own, pass rates, regressions, win rates,
and the verdict message that states every number against its limit and the stable's.

Pure functions (`plnt.sagas.gating.scoring`), so every case is spelled out here.
"""

from __future__ import annotations

from typing import Any

import pytest

from plnt.api import evaluations as ev
from plnt.sagas.gating import scoring


def scorer(**fields: Any) -> ev.Scorer:
    return ev.Scorer.model_validate(fields)


def evaluation(**fields: Any) -> ev.CanaryEvaluation:
    fields.setdefault("cases", [{"name": "c", "inputs": {}, "expect": [{"contains": "x"}]}])
    return ev.CanaryEvaluation.model_validate(fields)


# -- one scorer, one value --------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "output", "passed"),
    [
        ({"contains": "5"}, " 5, 6, 7", True),
        ({"contains": "5"}, " 6, 7", False),
        ({"contains": "b"}, {"a": "b"}, True),  # non-strings as compact sorted JSON
        ({"regex": r"^\s*5\b"}, " 5, 6", True),
        ({"regex": r"^\s*5\b"}, " 50", False),
        ({"equals": 5}, 5, True),
        ({"equals": 5}, "5", False),
        ({"equals": None}, None, True),
        ({"equals": {"a": [1]}}, {"a": [1]}, True),
        ({"jsonSchema": {"type": "object", "required": ["a"]}}, {"a": 1}, True),
        ({"jsonSchema": {"type": "object", "required": ["a"]}}, {"b": 1}, False),
        ({"jsonSchema": {"type": "object"}}, '{"a": 1}', True),  # JSON text is parsed
        ({"jsonSchema": {"type": "string"}}, "plain", True),
        ({"contains": "x", "path": "/a/0"}, {"a": ["xyz"]}, True),
        ({"contains": "x", "path": "/a/1"}, {"a": ["xyz"]}, False),
        ({"equals": 2, "path": "/n"}, '{"n": 2}', True),  # a string holding JSON, by path
        ({"equals": 2, "path": "/n"}, "not json", False),
        ({"contains": "x", "path": ""}, "x", True),  # "" is the whole output
    ],
)
def test_each_deterministic_scorer_checks_the_selected_value(
    fields: dict[str, Any], output: Any, passed: bool
) -> None:
    found = scoring.check(scorer(**fields), output)
    assert found.passed is passed
    assert (found.detail == "") is passed  # a failure always says why


def test_a_missing_path_fails_naming_the_path() -> None:
    found = scoring.check(scorer(contains="x", path="/missing"), {"a": 1})
    assert found == scoring.Check(False, "no value at /missing")


def test_a_schema_failure_names_where_and_counts_the_rest() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b", "c"]}
    found = scoring.check(scorer(jsonSchema=schema), {"a": "x"})
    assert not found.passed and "more)" in found.detail


def test_a_judge_is_not_a_deterministic_check() -> None:
    judge = scorer(judge={"backend": "j", "rubric": "r"})
    with pytest.raises(ValueError, match="not a deterministic scorer"):
        scoring.check(judge, "x")
    assert scoring.score([judge], ev.Answer(output="x")) == []


def test_an_answer_with_an_error_fails_every_scorer_with_the_error() -> None:
    answer = ev.Answer(error="HTTP 502: backend down")
    scores = scoring.score([scorer(contains="x"), scorer(regex="y", name="why")], answer)
    assert [(s.scorer, s.passed, s.detail) for s in scores] == [
        ("contains", False, "HTTP 502: backend down"),
        ("why", False, "HTTP 502: backend down"),
    ]


@pytest.mark.parametrize(
    ("first", "second", "outcome"),
    [
        ("canary", "canary", "canary"),
        ("stable", "stable", "stable"),
        ("tie", "tie", "tie"),
        ("canary", "stable", "tie"),  # position bias: a disagreement is a tie
        ("stable", "canary", "tie"),
        ("canary", "tie", "tie"),
    ],
)
def test_two_judgements_with_the_order_swapped_stand_only_when_they_agree(
    first: ev.Outcome, second: ev.Outcome, outcome: ev.Outcome
) -> None:
    assert scoring.judged(first, second) == outcome


# -- limits ----------------------------------------------------------------------------


def test_a_scorers_own_limits_override_the_evaluations() -> None:
    found = evaluation(
        minPassRate=0.9,
        maxRegression=0.1,
        minWinRate=0.4,
        limits={"strict": {"minPassRate": 1.0}, "judge": {"minWinRate": 0.6}},
    )
    assert scoring.limits_of(found, "strict") == scoring.Limits(1.0, 0.1, 0.4)
    assert scoring.limits_of(found, "judge") == scoring.Limits(0.9, 0.1, 0.6)
    assert scoring.limits_of(found, "other") == scoring.Limits(0.9, 0.1, 0.4)


def test_without_limits_every_check_must_pass_and_no_regression_is_held() -> None:
    assert scoring.limits_of(evaluation(), "x") == scoring.Limits(1.0, None, 0.5)


L = scoring.Limits


@pytest.mark.parametrize(
    ("canary", "stable", "limits", "passed", "message"),
    [
        ((3, 3), (3, 3), L(1.0, 0.0, None), True, "c pass rate 1.00 >= min 1.00; stable 1.00, "
         "regression 0.00 <= max 0.00 (3/3)"),
        ((0, 3), (3, 3), L(1.0, 0.0, None), False, "c pass rate 0.00 < min 1.00; stable 1.00, "
         "regression 1.00 > max 0.00 (0/3)"),
        ((2, 4), (3, 4), L(0.5, 0.25, None), True, "c pass rate 0.50 >= min 0.50; stable 0.75, "
         "regression 0.25 <= max 0.25 (2/4)"),
        ((2, 4), (4, 4), L(0.5, 0.25, None), False, "c pass rate 0.50 >= min 0.50; stable 1.00, "
         "regression 0.50 > max 0.25 (2/4)"),
        ((1, 4), (0, 4), L(0.0, 0.0, None), True, "c pass rate 0.25 >= min 0.00; stable 0.00, "
         "regression -0.25 <= max 0.00 (1/4)"),  # better than the stable
        ((1, 2), None, L(0.5, 0.0, None), True, "c pass rate 0.50 >= min 0.50 (1/2)"),
        ((0, 2), None, L(None, 0.0, None), True, "c pass rate 0.00 (0/2)"),  # no stable
        ((0, 0), None, L(0.0, None, None), False, "c pass rate 0.00 < min 0.00 (0/0)"),
    ],
)  # fmt: skip
def test_a_pass_rate_is_held_to_its_absolute_limit_and_its_regression_against_the_stable(
    canary: tuple[int, int],
    stable: tuple[int, int] | None,
    limits: scoring.Limits,
    passed: bool,
    message: str,
) -> None:
    verdict = scoring.pass_verdict("c", "contains", canary, stable, limits)
    assert verdict.passed is passed
    assert verdict.message == message


def test_with_no_stable_the_regression_limit_is_not_recorded_as_applied() -> None:
    verdict = scoring.pass_verdict("c", "contains", (1, 1), None, L(1.0, 0.0, None))
    assert verdict.stable_pass_rate is None and verdict.regression is None
    assert verdict.max_regression is None and verdict.min_pass_rate == 1.0


@pytest.mark.parametrize(
    ("outcomes", "limit", "win_rate", "passed"),
    [
        (["canary", "canary"], 0.5, 1.0, True),
        (["tie", "tie"], 0.5, 0.5, True),  # ties halved
        (["stable", "tie"], 0.5, 0.25, False),
        (["canary", "stable"], 0.5, 0.5, True),
        (["canary", "stable", "stable"], 0.5, 1 / 3, False),
        ([], 0.0, 0.0, False),  # nothing compared never passes
    ],
)
def test_a_judges_win_rate_counts_ties_as_half_a_win(
    outcomes: list[ev.Outcome], limit: float, win_rate: float, passed: bool
) -> None:
    verdict = scoring.win_verdict("j", outcomes, L(None, None, limit))
    assert verdict.win_rate == pytest.approx(win_rate)
    assert verdict.passed is passed
    assert (verdict.wins, verdict.ties, verdict.losses) == (
        outcomes.count("canary"),
        outcomes.count("tie"),
        outcomes.count("stable"),
    )
    assert f"win rate {win_rate:.2f}" in verdict.message


# -- verdicts over cases -----------------------------------------------------------------


def case_record(name: str, canary: list[bool], stable: list[bool] | None, *names: str) -> Any:
    def answer(passes: list[bool]) -> ev.Answer:
        return ev.Answer(
            output="o",
            scores=[ev.Score(scorer=n, passed=p) for n, p in zip(names, passes, strict=True)],
        )

    return ev.CaseRecord(
        name=name, canary=answer(canary), stable=answer(stable) if stable is not None else None
    )


def test_verdicts_aggregate_each_scorer_over_every_case_in_order_of_first_use() -> None:
    found = evaluation(
        cases=[
            {"name": "a", "expect": [{"contains": "5"}, {"regex": "6", "name": "six"}]},
            {"name": "b", "expect": [{"contains": "7"}]},
        ],
        maxRegression=0.0,
    )
    records = [
        case_record("a", [True, True], [True, True], "contains", "six"),
        case_record("b", [False], [True], "contains"),
    ]
    verdicts = scoring.verdicts(found, found.cases, records, has_stable=True)
    assert [(v.name, v.type, v.checks, v.passed) for v in verdicts] == [
        ("contains", "contains", 2, False),
        ("six", "regex", 1, True),
    ]
    assert verdicts[0].canary_pass_rate == 0.5 and verdicts[0].stable_pass_rate == 1.0
    message = scoring.summary(verdicts, cases=2, has_stable=True)
    assert message == (
        "evaluation failed: contains pass rate 0.50 < min 1.00; stable 1.00,"
        " regression 0.50 > max 0.00 (1/2)"
    )


def test_a_passing_verdict_states_every_number_and_says_when_there_is_no_stable() -> None:
    found = evaluation(cases=[{"name": "a", "expect": [{"contains": "5"}]}])
    records = [case_record("a", [True], None, "contains")]
    verdicts = scoring.verdicts(found, found.cases, records, has_stable=False)
    assert scoring.summary(verdicts, cases=1, has_stable=False) == (
        "evaluation passed: 1 case(s) (no stable: absolute limits only),"
        " contains pass rate 1.00 >= min 1.00 (1/1)"
    )


def test_judge_scorers_are_left_out_without_a_stable_and_counted_with_one() -> None:
    judge = {"judge": {"backend": "j", "rubric": "r"}}
    found = evaluation(cases=[{"name": "a", "expect": [judge]}])
    record = case_record("a", [], [])
    assert scoring.verdicts(found, found.cases, [record], has_stable=False) == []
    record.judgements = [
        ev.Judgement(scorer="judge", canary_first="canary", stable_first="stable", outcome="tie")
    ]
    (verdict,) = scoring.verdicts(found, found.cases, [record], has_stable=True)
    assert (verdict.type, verdict.win_rate, verdict.passed) == ("judge", 0.5, True)
