"""core/v1 Namespaces in standalone plnt, as kube-apiserver and its namespace controller
behave: the start-up namespaces, Terminating while content is deleted through the
normal delete path, NamespaceLifecycle's refusals, the empty Service list of
`kubectl cluster-info`, SelfSubjectRulesReview, and a generic client (kubernetes_asyncio)
listing and watching namespaces.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as kube_client
from kubernetes_asyncio import watch as kube_watch

from tests.support import tls
from tests.support.api_server import Api, workflowrun
from tests.support.waiting import eventually

NS = "/api/v1/namespaces"
RULES = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"


def namespace(name: str, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def backend(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": name},
        "spec": {"type": "echo"},
    }


def runs(ns: str) -> str:
    return f"/apis/plnt.work/v1/namespaces/{ns}/workflowruns"


async def test_kubes_start_up_namespaces_exist_active_and_default_may_not_be_deleted(
    api: Api,
) -> None:
    listed = await api.call("GET", NS)
    assert listed.status == 200 and listed.json["kind"] == "NamespaceList"
    items = {item["metadata"]["name"]: item for item in listed.json["items"]}
    assert set(items) == {"default", "kube-system", "kube-public", "kube-node-lease"}
    default = items["default"]
    assert default["spec"] == {"finalizers": ["kubernetes"]}
    assert default["status"] == {"phase": "Active"}
    assert default["metadata"]["labels"] == {"kubernetes.io/metadata.name": "default"}
    assert "generation" not in default["metadata"]
    refused = await api.call("DELETE", f"{NS}/default")
    assert refused.status == 403
    assert refused.json["message"] == (
        'namespaces "default" is forbidden: this namespace may not be deleted'
    )


async def test_namespaces_are_discovered_as_cluster_scoped_with_services_read_only(
    api: Api,
) -> None:
    legacy = await api.call("GET", "/api/v1")
    resources = {r["name"]: r for r in legacy.json["resources"]}
    assert resources["namespaces"]["namespaced"] is False
    assert resources["namespaces"]["shortNames"] == ["ns"]
    assert resources["namespaces/finalize"]["verbs"] == ["update"]
    assert resources["services"]["verbs"] == ["get", "list", "watch"]
    aggregated = await api.call(
        "GET",
        "/api",
        headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
    )
    v2 = {r["resource"]: r for r in aggregated.json["items"][0]["versions"][0]["resources"]}
    assert v2["namespaces"]["scope"] == "Cluster"
    assert {s["subresource"] for s in v2["namespaces"]["subresources"]} == {"finalize", "status"}
    spec = await api.call("GET", "/openapi/v3/api/v1")
    assert "/api/v1/namespaces/{name}" in spec.json["paths"]
    services = await api.call(
        "GET",
        "/api/v1/namespaces/kube-system/services?labelSelector=kubernetes.io/cluster-service%3Dtrue",
    )
    assert services.status == 200 and services.json["kind"] == "ServiceList"
    assert services.json["items"] == []
    created = await api.call(
        "POST",
        "/api/v1/namespaces/default/services",
        body={"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
    )
    assert created.status == 405


async def test_a_namespace_is_created_labelled_and_only_its_metadata_changes_by_update(
    api: Api,
) -> None:
    created = await api.call("POST", NS, body=namespace("team-a", tier="gold"))
    assert created.status == 201
    ns = created.json
    assert ns["status"] == {"phase": "Active"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]}
    assert ns["metadata"]["labels"] == {"tier": "gold", "kubernetes.io/metadata.name": "team-a"}
    patched = await api.call(
        "PATCH",
        f"{NS}/team-a",
        body={"metadata": {"labels": {"tier": "silver"}}, "spec": {"finalizers": []}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status == 200
    assert patched.json["metadata"]["labels"]["tier"] == "silver"
    assert patched.json["spec"] == {"finalizers": ["kubernetes"]}  # only finalize changes it
    dotted = await api.call("POST", NS, body=namespace("a.b"))  # a subdomain, not a label
    assert dotted.status == 422
    assert dotted.json["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "a.b": must not contain dots',
            "field": "metadata.name",
        }
    ]
    bad = await api.call("POST", NS, body=namespace("A_b"))
    assert bad.status == 422
    assert bad.json["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "A_b": a lowercase RFC 1123 label must consist of lower '
            "case alphanumeric characters or '-', and must start and end with an alphanumeric "
            "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            "field": "metadata.name",
        }
    ]


async def test_objects_in_a_namespace_that_does_not_exist_are_refused_with_404(
    api: Api,
) -> None:
    for dry_run in ("", "?dryRun=All"):
        reply = await api.call("POST", runs("nowhere") + dry_run, body=workflowrun("r"))
        assert reply.status == 404, dry_run
        assert reply.json["message"] == 'namespaces "nowhere" not found'
        assert reply.json["details"] == {"name": "nowhere", "group": "", "kind": "namespaces"}


async def test_deleting_a_namespace_deletes_its_content_and_waits_for_finalizers(
    api: Api,
) -> None:
    await api.call("POST", NS, body=namespace("doomed"))
    held = workflowrun("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    assert (await api.call("POST", runs("doomed"), body=held)).status == 201
    backends = "/apis/plnt.work/v1/namespaces/doomed/plntbackends"
    assert (await api.call("POST", backends, body=backend("b"))).status == 201

    marked = await api.call("DELETE", f"{NS}/doomed")
    assert marked.status == 200
    assert marked.json["status"]["phase"] == "Terminating"
    assert marked.json["metadata"]["deletionTimestamp"]

    async def reports_the_held_run() -> dict[str, Any] | None:
        ns = (await api.call("GET", f"{NS}/doomed")).json
        conditions = {c["type"]: c for c in ns["status"].get("conditions", [])}
        remaining = conditions.get("NamespaceFinalizersRemaining", {})
        return conditions if remaining.get("status") == "True" else None

    conditions = await eventually(reports_the_held_run, what="the finalizer condition")
    assert conditions["NamespaceFinalizersRemaining"]["message"] == (
        "Some finalizers are remaining: example.com/hold in 1 resource instances"
    )
    assert conditions["NamespaceContentRemaining"]["message"] == (
        "Some resources are remaining: workflowruns.plnt.work has 1 resource instances"
    )
    assert conditions["NamespaceDeletionContentFailure"]["status"] == "False"
    assert (await api.call("GET", f"{backends}/b")).status == 404
    run = (await api.call("GET", f"{runs('doomed')}/held")).json
    assert run["metadata"]["deletionTimestamp"]

    # Admission runs for a dry run too, and before the name's existence is looked at.
    dry = await api.call("POST", runs("doomed") + "?dryRun=All", body=workflowrun("held"))
    assert dry.status == 403 and dry.json["details"]["causes"][0]["reason"] == (
        "NamespaceTerminating"
    )
    late = await api.call("POST", runs("doomed"), body=workflowrun("late"))
    assert late.status == 403
    assert late.json["message"] == (
        'workflowruns.plnt.work "late" is forbidden: unable to create new content in '
        "namespace doomed because it is being terminated"
    )
    assert late.json["details"]["causes"] == [
        {
            "reason": "NamespaceTerminating",
            "message": "namespace doomed is being terminated",
            "field": "metadata.namespace",
        }
    ]
    again = await api.call("DELETE", f"{NS}/doomed")
    assert again.status == 409
    assert again.json["message"] == (
        'Operation cannot be fulfilled on namespaces "doomed": The system is ensuring all '
        "content is removed from this namespace.  Upon completion, this namespace will "
        "automatically be purged by the system."
    )
    relabelled = await api.call(
        "PATCH",
        f"{NS}/doomed",
        body={"metadata": {"labels": {"still": "here"}}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert relabelled.status == 200  # an update does not remove a namespace still held

    released = await api.call(
        "PATCH",
        f"{runs('doomed')}/held",
        body={"metadata": {"finalizers": None}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert released.status == 200

    async def gone() -> bool:
        return (await api.call("GET", f"{NS}/doomed")).status == 404

    await eventually(gone, what="the namespace to be removed")
    assert (await api.call("GET", f"{runs('doomed')}/held")).status == 404


async def test_the_finalize_subresource_releases_a_namespace_by_its_finalizers_alone(
    api: Api,
) -> None:
    await api.call("POST", NS, body=namespace("fin"))
    ns = (await api.call("GET", f"{NS}/fin")).json
    ns["spec"]["finalizers"] = []
    ns["metadata"]["labels"]["ignored"] = "yes"
    ns["status"] = {"phase": "Terminating"}
    finalized = await api.call("PUT", f"{NS}/fin/finalize", body=ns)
    assert finalized.status == 200
    assert finalized.json["spec"] == {"finalizers": []}
    assert "ignored" not in finalized.json["metadata"]["labels"]
    assert finalized.json["status"] == {"phase": "Active"}
    deleted = await api.call("DELETE", f"{NS}/fin")
    assert deleted.status == 200 and deleted.json["status"]["phase"] == "Terminating"

    async def gone() -> bool:  # the controller finds nothing to wait for and removes it
        return (await api.call("GET", f"{NS}/fin")).status == 404

    await eventually(gone, what="the finalized namespace to be removed")


async def test_a_watch_of_namespaces_sees_creation_termination_and_removal(api: Api) -> None:
    listed = await api.call("GET", NS)
    rv = listed.json["metadata"]["resourceVersion"]
    seen: list[tuple[str, str, str]] = []

    async def follow() -> None:
        async with api.session.get(
            api.url + NS, params={"watch": "true", "resourceVersion": rv}
        ) as reply:
            async for line in reply.content:
                event = json.loads(line)
                obj = event["object"]
                seen.append((event["type"], obj["metadata"]["name"], obj["status"]["phase"]))
                if event["type"] == "DELETED":
                    return

    watcher = asyncio.create_task(follow())
    try:
        await api.call("POST", NS, body=namespace("watched"))
        await api.call("DELETE", f"{NS}/watched")
        async with asyncio.timeout(30):
            await watcher
    finally:
        watcher.cancel()
    assert seen[0] == ("ADDED", "watched", "Active")
    assert ("MODIFIED", "watched", "Terminating") in seen
    assert seen[-1][:2] == ("DELETED", "watched")


async def test_rules_review_lists_the_policy_for_an_admin_and_a_viewer(
    api: Api, tmp_path: Path
) -> None:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview"}
    missing = await api.call("POST", RULES, body={**body, "spec": {}})
    assert missing.status == 400 and missing.json["message"] == "no namespace on request"
    admin = await api.call("POST", RULES, body={**body, "spec": {"namespace": "default"}})
    assert admin.status == 201
    status = admin.json["status"]
    assert status["incomplete"] is False
    assert {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in status["resourceRules"]
    assert {"verbs": ["*"], "nonResourceURLs": ["*"]} in status["nonResourceRules"]

    viewer = tls.write_client_cert(
        tls.client_ca(api.pki), tmp_path / "v", common_name="vic", organizations=["plnt:viewers"]
    )
    async with (
        tls.client_session(api.pki, cert=viewer) as session,
        session.post(
            api.url + RULES,
            json={**body, "spec": {"namespace": "default"}},
        ) as reply,
    ):
        assert reply.status == 201
        rules = (await reply.json())["status"]
    granted = {
        resource: tuple(rule["verbs"])
        for rule in rules["resourceRules"]
        for resource in rule.get("resources", [])
    }
    assert granted["workflowruns"] == ("get", "list", "watch")
    assert granted["selfsubjectrulesreviews"] == ("create",)
    assert "*" not in granted and "workflowruns/invoke" not in granted
    assert rules["incomplete"] is False
    paths = {url for rule in rules["nonResourceRules"] for url in rule["nonResourceURLs"]}
    assert {"/healthz", "/version", "/apis/*"} <= paths and "*" not in paths


async def test_a_generic_client_lists_and_watches_namespaces(api: Api, tmp_path: Path) -> None:
    admin = tls.admin(api.pki)
    config = kube_client.Configuration(host=api.url)
    config.ssl_ca_cert = str(api.pki.ca_cert)
    config.cert_file, config.key_file = str(admin.cert), str(admin.key)
    async with kube_client.ApiClient(config) as client:
        core = kube_client.CoreV1Api(client)
        listed = await core.list_namespace()
        assert {"default", "kube-system"} <= {n.metadata.name for n in listed.items}
        await api.call("POST", NS, body=namespace("seen-by-client"))
        names: list[tuple[str, str]] = []
        async with (
            asyncio.timeout(30),
            kube_watch.Watch().stream(
                core.list_namespace, resource_version=listed.metadata.resource_version
            ) as events,
        ):
            async for event in events:
                names.append((event["type"], event["object"].metadata.name))
                if event["object"].metadata.name == "seen-by-client":
                    break
    assert names[-1] == ("ADDED", "seen-by-client")
