"""The API error tree: each error's HTTP code and reason, and the metav1.Status it becomes."""

from __future__ import annotations

import pytest

from plnt.api import errors

WORKFLOWRUNS = errors.GroupResource("plnt.work", "workflowruns")


@pytest.mark.parametrize(
    ("kind", "code", "reason"),
    [
        (errors.BadRequest, 400, "BadRequest"),
        (errors.Unauthorized, 401, "Unauthorized"),
        (errors.Forbidden, 403, "Forbidden"),
        (errors.NotFound, 404, "NotFound"),
        (errors.MethodNotSupported, 405, "MethodNotAllowed"),
        (errors.NotAcceptable, 406, "NotAcceptable"),
        (errors.AlreadyExists, 409, "AlreadyExists"),
        (errors.Conflict, 409, "Conflict"),
        (errors.Expired, 410, "Expired"),
        (errors.RequestEntityTooLarge, 413, "RequestEntityTooLarge"),
        (errors.UnsupportedMediaType, 415, "UnsupportedMediaType"),
        (errors.Invalid, 422, "Invalid"),
        (errors.TooManyRequests, 429, "TooManyRequests"),
        (errors.InternalError, 500, "InternalError"),
        (errors.ServiceUnavailable, 503, "ServiceUnavailable"),
        (errors.Timeout, 504, "Timeout"),
    ],
)
def test_each_error_answers_with_its_http_code_and_reason_in_a_failure_status(
    kind: type[errors.APIError], code: int, reason: str
) -> None:
    error = kind("something went wrong")
    assert isinstance(error, errors.APIError)
    assert (error.code, error.reason) == (code, reason)
    assert error.to_status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "something went wrong",
        "reason": reason,
        "code": code,
    }


def test_a_status_has_details_only_for_what_the_error_knows() -> None:
    error = errors.APIError("m", name="x", group="", uid="u-1", retry_after_seconds=0)
    assert error.to_status()["details"] == {
        "name": "x",
        "group": "",
        "uid": "u-1",
        "retryAfterSeconds": 0,
    }
    assert "details" not in errors.APIError("m").to_status()


def test_not_found_names_the_group_resource_and_object_as_kubectl_prints_it() -> None:
    status = errors.NotFound.of(WORKFLOWRUNS, "ghost").to_status()
    assert status["message"] == 'workflowruns.plnt.work "ghost" not found'
    assert status["details"] == {"name": "ghost", "group": "plnt.work", "kind": "workflowruns"}


def test_a_core_resource_has_no_group_in_its_message() -> None:
    events = errors.GroupResource("", "events")
    assert str(events) == "events"
    assert errors.AlreadyExists.of(events, "e").message == 'events "e" already exists'


def test_a_conflict_says_why_the_operation_cannot_be_fulfilled() -> None:
    error = errors.Conflict.of(WORKFLOWRUNS, "x", errors.OPTIMISTIC_LOCK_MESSAGE)
    assert error.message == (
        'Operation cannot be fulfilled on workflowruns.plnt.work "x": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    assert (error.code, error.reason) == (409, "Conflict")


def test_method_not_supported_names_the_action_and_resource() -> None:
    error = errors.MethodNotSupported.of(WORKFLOWRUNS, "deletecollection")
    assert error.message == (
        'deletecollection is not supported on resources of kind "workflowruns.plnt.work"'
    )


def test_invalid_lists_every_cause_with_its_field_in_message_and_details() -> None:
    causes = [
        errors.Cause("FieldValueInvalid", "must be >= 0", "spec.replicas"),
        errors.Cause("FieldValueRequired", "required value", "spec.workflow.ref"),
    ]
    status = errors.Invalid.of("WorkflowRun.plnt.work", "x", causes).to_status()
    assert status["message"] == (
        'WorkflowRun.plnt.work "x" is invalid: '
        "[spec.replicas: must be >= 0, spec.workflow.ref: required value]"
    )
    assert status["details"]["kind"] == "WorkflowRun"
    assert status["details"]["group"] == "plnt.work"
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": "must be >= 0", "field": "spec.replicas"},
        {"reason": "FieldValueRequired", "message": "required value", "field": "spec.workflow.ref"},
    ]


def test_invalid_with_one_cause_is_not_bracketed_and_a_cause_without_field_has_none() -> None:
    cause = errors.Cause("FieldValueForbidden", "the object is immutable")
    error = errors.Invalid.of("WorkflowRun.plnt.work", "x", [cause])
    assert error.message == 'WorkflowRun.plnt.work "x" is invalid: the object is immutable'
    assert error.to_status()["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "message": "the object is immutable"}
    ]


def test_an_internal_error_wraps_the_unexpected_exception_as_a_cause() -> None:
    status = errors.InternalError.wrap(KeyError()).to_status()
    assert status["message"] == "Internal error occurred: KeyError"
    assert status["code"] == 500
    assert status["details"]["causes"] == [
        {"reason": "UnexpectedServerResponse", "message": "KeyError"}
    ]
    wrapped = errors.InternalError.wrap(RuntimeError("etcd went away"))
    assert wrapped.message == "Internal error occurred: etcd went away"


def test_retry_after_is_carried_for_throttling_and_unavailability() -> None:
    status = errors.TooManyRequests("slow down", retry_after_seconds=2).to_status()
    assert status["details"] == {"retryAfterSeconds": 2}
    assert errors.ServiceUnavailable("down", retry_after_seconds=5).retry_after_seconds == 5


def test_the_error_is_an_exception_whose_text_is_its_message() -> None:
    with pytest.raises(errors.NotFound, match='"ghost" not found'):
        raise errors.NotFound.of(WORKFLOWRUNS, "ghost")
