"""The Invocation kind over real HTTP: admission, validation, immutability, who may create one.

An in-process API server on a real etcd, without sagas (nothing runs the Invocations:
these tests are about the object). Creating an Invocation invokes its run, so it also
needs `create` on `workflowruns/invoke` for that run: a token user granted Invocations but
not the invoke gets a 403 naming both.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import tls
from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.invocations import INVOCATIONS, invocation

APPLY = "application/apply-patch+yaml"
TOKENS = (
    'tok-ivy,ivy,uid-ivy,"plnt:users"\n'
    'tok-ian,ian,uid-ian,"plnt:users,plnt:runners"\n'
    'tok-ron,ron,uid-ron,"plnt:runners"\n'
)
POLICY = {
    "rules": [
        {"groups": ["system:masters"], "verbs": ["*"], "resources": ["*"]},
        {
            "groups": ["plnt:users"],
            "verbs": ["create", "get", "list", "watch", "delete", "patch"],
            "resources": ["invocations", "workflowruns"],
        },
        {"groups": ["plnt:runners"], "verbs": ["create"], "resources": ["workflowruns/invoke"]},
    ]
}


@pytest.fixture
async def guarded(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Api]:
    """A server with a token file and the policy above (the admin certificate still works)."""
    tokens, policy = tmp_path / "tokens.csv", tmp_path / "policy.yaml"
    tokens.write_text(TOKENS)
    policy.write_text(yaml.safe_dump(POLICY))
    async with serving(etcd_endpoint, tmp_path, token_file=tokens, policy_file=policy) as api:
        yield api


async def as_user(
    api: Api, token: str, method: str, path: str, body: Any, *, media: str = "application/json"
) -> tuple[int, Any]:
    async with (
        tls.client_session(api.pki) as session,
        session.request(
            method,
            api.url + path,
            data=json.dumps(body),
            headers={"Authorization": f"Bearer {token}", "Content-Type": media},
        ) as response,
    ):
        return response.status, await response.json()


async def test_an_invocation_is_created_pending_owned_by_its_run_with_defaults(api: Api) -> None:
    run = (await api.call("POST", BASE, body=workflowrun("summarize"))).json
    reply = await api.call("POST", INVOCATIONS, body=invocation("first"))
    assert reply.status == 201, reply.text
    obj = reply.json
    assert obj["spec"] == {
        "workflowRun": "summarize",
        "inputs": {"topic": "etcd"},
        "revision": "stable",
        "timeoutSeconds": 600,
        "ttlSecondsAfterFinished": 3600,
    }
    assert obj["status"]["phase"] == "Pending"
    assert obj["status"]["conditions"][0]["type"] == "Reconciling"
    assert obj["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "plnt.work/v1",
            "kind": "WorkflowRun",
            "name": "summarize",
            "uid": run["metadata"]["uid"],
            "controller": True,
        }
    ]
    listed = await api.call(
        "GET", INVOCATIONS, params={"fieldSelector": "spec.workflowRun=summarize"}
    )
    assert [item["metadata"]["name"] for item in listed.json["items"]] == ["first"]
    none = await api.call("GET", INVOCATIONS, params={"fieldSelector": "spec.workflowRun=other"})
    assert none.json["items"] == []


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"workflowRun": ""}, "spec.workflowRun", "Required value"),
        ({"revision": "latest"}, "spec.revision", 'Unsupported value: "latest"'),
        ({"revision": 0}, "spec.revision", "Unsupported value: 0"),
        ({"timeoutSeconds": 0}, "spec.timeoutSeconds", "greater than or equal to 1"),
        ({"ttlSecondsAfterFinished": -1}, "spec.ttlSecondsAfterFinished", "greater than or"),
        ({"inputs": {"text": "x" * 300_000}}, "spec.inputs", "Too long: may not be more than"),
    ],
)
async def test_an_invalid_spec_is_a_422_naming_the_field(
    api: Api, spec: dict[str, Any], field: str, message: str
) -> None:
    await api.call("POST", BASE, body=workflowrun("summarize"))
    reply = await api.call("POST", INVOCATIONS, body=invocation("bad", **spec))
    assert reply.status == 422, reply.text
    causes = reply.json["details"]["causes"]
    assert [c["field"] for c in causes] == [field], causes
    assert message in causes[0]["message"], causes


async def test_an_invocation_of_a_missing_run_is_a_422_on_spec_workflow_run(api: Api) -> None:
    reply = await api.call("POST", INVOCATIONS, body=invocation("lost", run="nope"))
    assert reply.status == 422, reply.text
    (cause,) = reply.json["details"]["causes"]
    assert cause["field"] == "spec.workflowRun" and cause["reason"] == "FieldValueNotFound"
    assert reply.json["message"].startswith('Invocation.plnt.work "lost" is invalid: ')


async def test_the_spec_is_immutable_but_labels_may_change(api: Api) -> None:
    await api.call("POST", BASE, body=workflowrun("summarize"))
    created = (await api.call("POST", INVOCATIONS, body=invocation("fixed"))).json
    merge = {"Content-Type": "application/merge-patch+json"}
    changed = await api.call(
        "PATCH",
        f"{INVOCATIONS}/fixed",
        data=json.dumps({"spec": {"inputs": {"topic": "raft"}, "revision": 2}}).encode(),
        headers=merge,
    )
    assert changed.status == 422, changed.text
    causes = {c["field"]: c["message"] for c in changed.json["details"]["causes"]}
    assert causes == {
        "spec.inputs": 'Invalid value: {"topic":"raft"}: field is immutable',
        "spec.revision": "Invalid value: 2: field is immutable",
    }
    labelled = await api.call(
        "PATCH",
        f"{INVOCATIONS}/fixed",
        data=json.dumps({"metadata": {"labels": {"team": "a"}}}).encode(),
        headers=merge,
    )
    assert labelled.status == 200, labelled.text
    # A PUT of the object as first written (defaults left out) changes nothing in the spec.
    body = invocation("fixed")
    body["metadata"]["resourceVersion"] = labelled.json["metadata"]["resourceVersion"]
    put = await api.call("PUT", f"{INVOCATIONS}/fixed", body=body)
    assert put.status == 200, put.text
    assert put.json["metadata"]["generation"] == created["metadata"]["generation"] == 1


async def test_creating_an_invocation_needs_invoke_on_the_run_too(guarded: Api) -> None:
    await guarded.call("POST", BASE, body=workflowrun("summarize"))
    status, body = await as_user(guarded, "tok-ivy", "POST", INVOCATIONS, invocation("sneaky"))
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'invocations.plnt.work "sneaky" is forbidden: User "ivy" cannot create resource'
        ' "workflowruns/invoke" in API group "plnt.work" in the namespace "default"'
        ' (an Invocation of workflowrun "summarize" invokes it, so creating one needs create'
        " on invocations and on workflowruns/invoke)"
    )
    assert body["details"] == {"name": "sneaky", "group": "plnt.work", "kind": "invocations"}
    dry = f"{INVOCATIONS}?dryRun=All"
    assert (await as_user(guarded, "tok-ivy", "POST", dry, invocation("sneaky")))[0] == 403
    # Server-side apply creates through the same path: the same check.
    applied = f"{INVOCATIONS}/sneaky?fieldManager=ivy"
    status, body = await as_user(
        guarded, "tok-ivy", "PATCH", applied, invocation("sneaky"), media=APPLY
    )
    assert status == 403 and "workflowruns/invoke" in body["message"], body
    gone = await guarded.call("GET", f"{INVOCATIONS}/sneaky")
    assert gone.status == 404

    status, body = await as_user(guarded, "tok-ian", "POST", INVOCATIONS, invocation("allowed"))
    assert status == 201, body
    # Without create on invocations, kube's own 403 comes first, before any admission.
    status, body = await as_user(guarded, "tok-ron", "POST", INVOCATIONS, invocation("other"))
    assert status == 403, body
    assert body["message"] == (
        'invocations.plnt.work is forbidden: User "ron" cannot create resource "invocations"'
        ' in API group "plnt.work" in the namespace "default"'
    )


async def test_discovery_and_openapi_describe_the_kind_and_the_renamed_log(api: Api) -> None:
    listed = (await api.call("GET", "/apis/plnt.work/v1")).json["resources"]
    by_name = {r["name"]: r for r in listed}
    kind = by_name["invocations"]
    assert (kind["kind"], kind["namespaced"], kind["shortNames"], kind["categories"]) == (
        "Invocation",
        True,
        ["inv"],
        ["plnt"],
    )
    assert by_name["invocations/status"]["verbs"] == ["get", "patch", "update"]
    assert by_name["workflowruns/invocationlog"]["verbs"] == ["get"]
    assert by_name["workflowruns/invocations"]["verbs"] == ["get"]
    document = (await api.call("GET", "/openapi/v3/apis/plnt.work/v1")).json
    schemas = document["components"]["schemas"]
    spec = schemas["work.plnt.v1.InvocationSpec"]["properties"]
    assert spec["revision"]["x-kubernetes-int-or-string"] is True
    assert spec["ttlSecondsAfterFinished"]["default"] == 3600
    paths = document["paths"]
    assert "/apis/plnt.work/v1/namespaces/{namespace}/invocations/{name}/status" in paths
    assert "/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/{name}/invocationlog" in paths
