"""`spec.workflow.verify` on the wire: one root of trust, and named in the OpenAPI schema
the API server publishes (what `kubectl explain` and schema-driven tools read)."""

from __future__ import annotations

import pydantic
import pytest

from plnt.api.workflowruns import SignatureVerification, WorkflowRun
from plnt.apiserver import openapi
from plnt.registry import workflowruns


@pytest.mark.parametrize(
    "verify",
    [
        {"signer": "release"},
        {"publicKey": {"file": "/keys/release.pub"}},
        {"ca": {"file": "/keys/ca.pem"}, "identity": "ci@example.com"},
    ],
)
def test_each_root_of_trust_alone_is_accepted(verify: dict[str, object]) -> None:
    assert SignatureVerification.model_validate(verify).to_wire() == verify


@pytest.mark.parametrize(
    "verify",
    [
        {},
        {"signer": "release", "ca": {"file": "/ca.pem"}, "identity": "x"},
        {"ca": {"file": "/ca.pem"}},
        {"publicKey": {"file": "/k.pub"}, "identity": "x"},
    ],
)
def test_none_two_or_a_ca_without_identity_are_refused(verify: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        SignatureVerification.model_validate(verify)


def test_the_openapi_schema_of_workflowrun_names_verify() -> None:
    published = openapi.schemas((workflowruns.DEFINITION,), ref_prefix="#/components/schemas/")
    text = str(published)
    assert "verify" in text and "SignatureVerification" in text
    schema = WorkflowRun.model_json_schema(by_alias=True)
    verify = schema["$defs"]["WorkflowReference"]["properties"]["verify"]
    assert "signer" in str(schema["$defs"]["SignatureVerification"]["properties"])
    assert "anyOf" in verify or "$ref" in verify
