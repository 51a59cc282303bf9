"""What a kind declares beside its definition reaches the generic machinery: its
subresources' body and answer schemas (OpenAPI), which of them are long-running (no
max-in-flight slot), and its grants in the standalone default policy."""

from __future__ import annotations

import dataclasses
from typing import Any

import pydantic
import pytest

from plnt.apiserver import authz, openapi
from plnt.registry import plntbackends, workflowruns
from plnt.registry.definitions import INVOKERS, VIEWERS, Grant, Schema, Subresource

GROUP, VERSION = "plnt.work", "v1"
PREFIX = "#/components/schemas/"


class WidgetPoke(pydantic.BaseModel):
    """Body of a made-up subresource."""

    strength: int


# A made-up kind: a PlntBackend under another name, with subresources of its own.
WIDGETS = dataclasses.replace(
    plntbackends.DEFINITION,
    kind="Widget",
    plural="widgets",
    singular="widget",
    subresources=(
        Subresource(
            "poke",
            "WidgetPokeAnswer",
            ("create",),
            body=Schema("WidgetPoke", model=WidgetPoke),
            body_required=False,
            answer=Schema("WidgetPokeAnswer", json_schema={"type": "object"}),
        ),
    ),
    grants=(
        Grant(VIEWERS, ("get",), ("",)),
        Grant(INVOKERS, ("create",), ("poke",)),
    ),
)


def _post(document: dict[str, Any], path: str) -> dict[str, Any]:
    item = document["paths"][f"/apis/{GROUP}/v1/namespaces/{{namespace}}/{path}"]
    post: dict[str, Any] = item["post"]
    return post


def test_a_subresource_is_documented_with_the_body_and_answer_its_kind_declares() -> None:
    document = openapi.v3_document(GROUP, VERSION, (WIDGETS,))
    schemas = document["components"]["schemas"]
    post = _post(document, "widgets/{name}/poke")

    assert post["requestBody"]["required"] is False
    body = post["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": PREFIX + "work.plnt.v1.WidgetPoke"}
    assert schemas["work.plnt.v1.WidgetPoke"]["properties"] == {"strength": {"type": "integer"}}
    answer = post["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": PREFIX + "work.plnt.v1.WidgetPokeAnswer"}
    assert schemas["work.plnt.v1.WidgetPokeAnswer"] == {"type": "object"}


def test_the_invoke_body_is_documented_as_the_envelope_the_runner_parses_too() -> None:
    document = openapi.v3_document(GROUP, VERSION, (workflowruns.DEFINITION,))
    post = _post(document, "workflowruns/{name}/invoke")
    envelope = document["components"]["schemas"]["work.plnt.v1.WorkflowRunInvocationRequest"]

    assert post["requestBody"]["required"] is True
    assert envelope["required"] == ["inputs"]
    assert envelope["additionalProperties"] is False
    assert set(envelope["properties"]) == {
        "inputs",
        "apiVersion",
        "kind",
        "completedSteps",
        "stepOutputs",
        "stepProgress",
    }
    assert envelope["properties"]["inputs"]["x-kubernetes-preserve-unknown-fields"] is True


def test_a_declared_answer_must_be_named_as_the_subresources_kind() -> None:
    with pytest.raises(ValueError, match="is a A, not B"):
        Subresource("x", "A", ("get",), answer=Schema("B", json_schema={}))


def test_the_default_policy_gives_each_kinds_grants_merged_by_group_and_verbs() -> None:
    rules = authz.kind_rules((workflowruns.DEFINITION, WIDGETS))

    assert rules == [
        {
            "groups": [VIEWERS],
            "verbs": ["get", "list", "watch"],
            "resources": [
                "workflowruns",
                "workflowruns/status",
                "workflowruns/scale",
                "workflowruns/bench",
                "workflowruns/shadow",
            ],
        },
        {
            "groups": [INVOKERS],
            "verbs": ["create"],
            "resources": ["workflowruns/invoke", "widgets/poke"],
        },
        {
            "groups": [INVOKERS],
            "verbs": ["get", "create"],
            "resources": ["workflowruns/bench", "workflowruns/proxy"],
        },
        {"groups": [VIEWERS], "verbs": ["get"], "resources": ["widgets"]},
    ]
