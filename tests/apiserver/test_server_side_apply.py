"""Server-side apply and managedFields over HTTP, against a real etcd (KUBE-API.md §5.3, §5.8)."""

from __future__ import annotations

import json
from typing import Any

from tests.support.api_server import BASE, Api, workflowrun

APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}


async def apply(
    api: Api, name: str, body: Any, *, manager: str = "kubectl", query: str = "force=false"
) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sep = "&" if query else ""
    return await api.call(
        "PATCH", f"{BASE}/{name}?fieldManager={manager}{sep}{query}", data=data, headers=APPLY
    )


def entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


async def test_apply_creates_a_missing_object_with_an_apply_entry(api: Api) -> None:
    reply = await apply(api, "ssa", workflowrun("ssa", replicas=2))
    assert reply.status == 201, reply.text
    obj = reply.json
    assert obj["spec"]["replicas"] == 2 and obj["metadata"]["generation"] == 1
    entry = entries(obj)[("kubectl", "Apply")]
    assert entry["apiVersion"] == "plnt.work/v1"
    assert entry["fieldsType"] == "FieldsV1"
    assert entry["time"].endswith("Z")
    assert entry["fieldsV1"]["f:spec"]["f:replicas"] == {}
    got = await api.call("GET", f"{BASE}/ssa")
    assert got.json["metadata"]["managedFields"] == obj["metadata"]["managedFields"]


async def test_yaml_configurations_are_accepted(api: Api) -> None:
    body = (
        b"apiVersion: plnt.work/v1\nkind: WorkflowRun\nmetadata:\n  name: yml\n"
        b"spec:\n  workflow:\n    ref: oci://r.example/wf:1\n"
        b"    digest: sha256:" + b"cd" * 32 + b"\n  replicas: 4\n"
    )
    reply = await apply(api, "yml", body)
    assert reply.status == 201, reply.text
    assert reply.json["spec"]["replicas"] == 4


async def test_reapplying_without_a_field_removes_it_and_bumps_generation(api: Api) -> None:
    assert (await apply(api, "rm", workflowrun("rm", replicas=3, gpuClass="l4"))).status == 201
    reply = await apply(api, "rm", workflowrun("rm", replicas=3))
    assert reply.status == 200, reply.text
    assert "gpuClass" not in reply.json["spec"]
    assert reply.json["metadata"]["generation"] == 2
    again = await apply(api, "rm", workflowrun("rm", replicas=3))
    assert again.json["metadata"]["resourceVersion"] == reply.json["metadata"]["resourceVersion"]


async def test_a_removed_field_with_a_default_returns_to_the_default(api: Api) -> None:
    await apply(api, "dflt", workflowrun("dflt", replicas=3))
    reply = await apply(api, "dflt", workflowrun("dflt"))
    assert reply.json["spec"]["replicas"] == 1


async def test_every_write_records_an_update_entry_for_its_manager(api: Api) -> None:
    created = await api.call("POST", BASE + "?fieldManager=kubectl-create", body=workflowrun("upd"))
    assert created.status == 201
    create_entry = entries(created.json)[("kubectl-create", "Update")]
    assert create_entry["fieldsV1"]["f:spec"]["."] == {}
    patched = await api.call(
        "PATCH",
        f"{BASE}/upd?fieldManager=kubectl-patch",
        data=b'{"spec":{"replicas":5}}',
        headers=MERGE,
    )
    owners = entries(patched.json)
    assert owners[("kubectl-patch", "Update")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in owners[("kubectl-create", "Update")]["fieldsV1"]["f:spec"]


async def test_without_field_manager_the_user_agent_names_the_manager(api: Api) -> None:
    await api.call("POST", BASE + "?fieldManager=c", body=workflowrun("ua"))
    patched = await api.call(
        "PATCH",
        f"{BASE}/ua",
        data=b'{"metadata":{"labels":{"a":"b"}}}',
        headers={**MERGE, "User-Agent": "my-controller/1.2 (linux)"},
    )
    assert ("my-controller", "Update") in entries(patched.json)


async def test_status_writes_record_the_status_subresource(api: Api) -> None:
    await api.call("POST", BASE + "?fieldManager=c", body=workflowrun("st"))
    current = (await api.call("GET", f"{BASE}/st")).json
    current["status"] = {"phase": "Ready"}
    reply = await api.call("PUT", f"{BASE}/st/status?fieldManager=saga", body=current)
    assert reply.status == 200, reply.text
    entry = entries(reply.json)[("saga", "Update")]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {".": {}, "f:phase": {}}}


async def test_a_conflicting_apply_is_refused_with_causes_and_changes_nothing(api: Api) -> None:
    await apply(api, "cf", workflowrun("cf", replicas=1))
    await api.call(
        "PATCH",
        f"{BASE}/cf?fieldManager=kubectl-client-side-apply",
        data=b'{"spec":{"replicas":5}}',
        headers=MERGE,
    )
    reply = await apply(api, "cf", workflowrun("cf", replicas=2))
    assert reply.status == 409
    status = reply.json
    assert status["reason"] == "Conflict" and status["status"] == "Failure"
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using '
        "plnt.work/v1: .spec.replicas"
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-client-side-apply" using plnt.work/v1',
            "field": ".spec.replicas",
        }
    ]
    assert (await api.call("GET", f"{BASE}/cf")).json["spec"]["replicas"] == 5


async def test_force_takes_ownership_of_conflicting_fields(api: Api) -> None:
    await apply(api, "fc", workflowrun("fc", replicas=1))
    await api.call(
        "PATCH", f"{BASE}/fc?fieldManager=other", data=b'{"spec":{"replicas":5}}', headers=MERGE
    )
    reply = await apply(api, "fc", workflowrun("fc", replicas=2), query="force=true")
    assert reply.status == 200, reply.text
    assert reply.json["spec"]["replicas"] == 2
    assert ("other", "Update") not in entries(reply.json)
    assert "f:replicas" in entries(reply.json)[("kubectl", "Apply")]["fieldsV1"]["f:spec"]


async def test_apply_requires_a_field_manager(api: Api) -> None:
    reply = await api.call(
        "PATCH", f"{BASE}/nofm", data=json.dumps(workflowrun("nofm")).encode(), headers=APPLY
    )
    assert reply.status == 422
    assert reply.json["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch"
    )
    assert reply.json["details"]["causes"][0]["field"] == "fieldManager"
    assert (await api.call("GET", f"{BASE}/nofm")).status == 404


async def test_dry_run_apply_answers_without_persisting(api: Api) -> None:
    created = await apply(api, "dry", workflowrun("dry"), query="force=false&dryRun=All")
    assert created.status == 201 and ("kubectl", "Apply") in entries(created.json)
    assert (await api.call("GET", f"{BASE}/dry")).status == 404
    await apply(api, "dry", workflowrun("dry"))
    changed = await apply(api, "dry", workflowrun("dry", replicas=7), query="dryRun=All")
    assert changed.status == 200 and changed.json["spec"]["replicas"] == 7
    assert (await api.call("GET", f"{BASE}/dry")).json["spec"]["replicas"] == 1


async def test_unusable_configurations_are_refused(api: Api) -> None:
    wrong_version = workflowrun("bad")
    wrong_version["apiVersion"] = "plnt.work/v2"
    reply = await apply(api, "bad", wrong_version)
    assert reply.status == 400 and "Incorrect version specified in apply patch" in reply.text
    other_name = await apply(api, "bad", workflowrun("elsewhere"))
    assert other_name.status == 400
    unknown = workflowrun("bad")
    unknown["spec"]["colour"] = "blue"
    refused = await apply(api, "bad", unknown, query="fieldValidation=Ignore")
    assert refused.status == 400
    assert ".spec.colour: field not declared in schema" in refused.json["message"]
    invalid = await apply(api, "bad", workflowrun("bad", replicas=-1))
    assert invalid.status == 422
    assert (await api.call("GET", f"{BASE}/bad")).status == 404


async def test_status_in_an_applied_configuration_is_ignored(api: Api) -> None:
    body = workflowrun("stat")
    body["status"] = {"phase": "Ready"}
    reply = await apply(api, "stat", body)
    assert reply.status == 201
    assert "status" not in reply.json
    assert "f:status" not in entries(reply.json)[("kubectl", "Apply")]["fieldsV1"]


async def test_the_last_applied_follow_up_apply_is_accepted(api: Api) -> None:
    await apply(api, "la", workflowrun("la"))
    annotation = {"kubectl.kubernetes.io/last-applied-configuration": '{"kind":"WorkflowRun"}\n'}
    follow_up = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": "la", "namespace": "default", "annotations": annotation},
    }
    reply = await apply(api, "la", follow_up, manager="kubectl-last-applied")
    assert reply.status == 200, reply.text
    assert reply.json["metadata"]["annotations"] == annotation
    assert reply.json["spec"]["workflow"]["ref"] == "oci://r.example/wf:1"
    assert ("kubectl-last-applied", "Apply") in entries(reply.json)


async def test_client_managed_fields_replace_or_reset_the_tracked_ones(api: Api) -> None:
    await api.call("POST", BASE + "?fieldManager=c", body=workflowrun("mf"))
    replacement = [
        {
            "manager": "migrated",
            "operation": "Apply",
            "apiVersion": "plnt.work/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        }
    ]
    patch = [{"op": "replace", "path": "/metadata/managedFields", "value": replacement}]
    reply = await api.call(
        "PATCH",
        f"{BASE}/mf",
        data=json.dumps(patch).encode(),
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert list(entries(reply.json)) == [("migrated", "Apply")]
    reset = await api.call(
        "PATCH",
        f"{BASE}/mf",
        data=b'{"metadata":{"managedFields":[]}}',
        headers=MERGE,
    )
    assert "managedFields" not in reset.json["metadata"]


async def test_force_is_refused_on_other_patch_types(api: Api) -> None:
    await api.call("POST", BASE, body=workflowrun("frc"))
    reply = await api.call(
        "PATCH", f"{BASE}/frc?force=true", data=b'{"spec":{"replicas":2}}', headers=MERGE
    )
    assert reply.status == 422
