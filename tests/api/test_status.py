"""metav1.Status, the body of every error: its fixed fields, defaults and camelCase details."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from plnt.api import errors, meta


def test_a_default_status_is_a_v1_failure_with_empty_metadata() -> None:
    assert meta.Status().to_wire() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
    }


def test_a_status_carries_details_and_causes_in_camel_case() -> None:
    status = meta.Status(
        message="m",
        reason="Invalid",
        code=422,
        details=meta.StatusDetails(
            name="x",
            kind="workflowruns",
            retry_after_seconds=3,
            causes=[meta.StatusCause(reason="FieldValueInvalid", message="bad", field="spec.a")],
        ),
    )
    wire = status.to_wire()
    assert wire["details"] == {
        "name": "x",
        "kind": "workflowruns",
        "retryAfterSeconds": 3,
        "causes": [{"reason": "FieldValueInvalid", "message": "bad", "field": "spec.a"}],
    }
    assert (wire["code"], wire["reason"], wire["message"]) == (422, "Invalid", "m")


def test_a_status_refuses_a_kind_or_outcome_it_cannot_be() -> None:
    with pytest.raises(ValidationError):
        meta.Status.model_validate({"kind": "Table"})
    with pytest.raises(ValidationError):
        meta.Status.model_validate({"status": "Maybe"})


def test_every_api_errors_status_body_is_a_valid_status_model() -> None:
    error = errors.Invalid.of(
        "WorkflowRun.plnt.work",
        "x",
        [errors.Cause("FieldValueInvalid", "must be >= 0", "spec.replicas")],
    )
    parsed = meta.Status.model_validate(error.to_status())
    assert parsed.to_wire() == error.to_status()
