"""Typed errors from answers that are not a metav1.Status with its kind: the runner's own error
bodies, the OpenAI-shaped errors of the proxy path, kube's bare timeout Status."""

from __future__ import annotations

import json

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


def test_kubes_timeout_status_without_kind_is_read_as_the_status_it_is() -> None:
    text = (
        '{"metadata":{},"status":"Failure","message":"Timeout: request did not complete '
        'within the allotted timeout","reason":"Timeout","details":{},"code":504}\n'
    )
    error = errors.from_response(504, json.loads(text), text)
    assert isinstance(error, errors.ServerError)
    assert (error.code, error.reason) == (504, "Timeout")
    assert str(error) == "Timeout: request did not complete within the allotted timeout"


def test_an_openai_shaped_error_of_the_proxy_path_keeps_the_status_reason_in_its_code() -> None:
    body = {
        "error": {
            "message": 'workflowruns.plnt.work "ghost" not found',
            "type": "not_found_error",
            "param": None,
            "code": "NotFound",
        }
    }
    error = errors.from_response(404, body, "")
    assert isinstance(error, errors.NotFound)
    assert (str(error), error.reason) == ('workflowruns.plnt.work "ghost" not found', "NotFound")
