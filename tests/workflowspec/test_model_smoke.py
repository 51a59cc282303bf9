"""Smoke expectations: equals, contains and jsonSchema, every failure reported."""

from __future__ import annotations

from plnt.workflowspec import model, smoke


def test_an_output_meeting_every_expectation_passes() -> None:
    expect = model.Expectations.model_validate(
        {"equals": {"a": "xyz"}, "contains": "xy", "jsonSchema": {"type": "object"}}
    )
    assert smoke.check(expect, {"a": "xyz"}) == []


def test_every_failed_expectation_is_reported() -> None:
    expect = model.Expectations.model_validate(
        {"equals": "yes", "contains": "zz", "jsonSchema": {"type": "integer"}}
    )
    failures = smoke.check(expect, "no")
    assert len(failures) == 3
    assert "does not equal 'yes'" in failures[0]
    assert "does not contain 'zz'" in failures[1]
    assert "is not of type 'integer'" in failures[2]


def test_equals_null_is_an_expectation_but_absent_equals_is_not() -> None:
    assert smoke.check(model.Expectations.model_validate({"equals": None}), "x") != []
    assert smoke.check(model.Expectations.model_validate({}), "x") == []
