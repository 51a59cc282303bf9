"""Typed errors from answers that are not metav1.Status: the runner's own error bodies."""

from __future__ import annotations

from plnt.client import errors


def test_a_runner_error_body_becomes_its_message_with_the_problem_paths() -> None:
    body = {
        "error": {
            "type": "invalid_inputs",
            "message": "inputs do not match the workflow's schema",
            "code": 422,
            "problems": [{"path": "topic", "message": "'' is too short"}],
        }
    }
    error = errors.from_response(422, body, "raw text")
    assert isinstance(error, errors.Invalid)
    assert str(error) == "inputs do not match the workflow's schema (topic: '' is too short)"


def test_a_body_that_is_neither_status_nor_runner_error_keeps_its_text() -> None:
    error = errors.from_response(502, None, "  upstream said no  ")
    assert isinstance(error, errors.ServerError)
    assert str(error) == "upstream said no"
