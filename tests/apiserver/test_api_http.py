"""The API server's HTTP contract, checked over real TLS against a real etcd.

Each test reads what a Kubernetes client depends on (KUBE-API.md): status
codes, Status bodies, resourceVersion rules, watch framing, discovery and
OpenAPI shapes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp

from plnt.storage.etcd import EtcdStore
from tests.support import tls
from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.etcd import running_etcd
from tests.support.waiting import eventually

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def create(api: Api, name: str, **spec: Any) -> dict[str, Any]:
    reply = await api.call("POST", BASE, body=workflowrun(name, **spec))
    assert reply.status == 201, reply.text
    return dict(reply.json)


async def read_events(
    response: aiohttp.ClientResponse, count: int, *, deadline: float = 10
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(deadline):
        while len(events) < count:
            line = await response.content.readline()
            if not line:
                break
            events.append(json.loads(line))
    return events


async def test_aggregated_discovery_names_every_resource_with_a_response_kind(api: Api) -> None:
    reply = await api.call("GET", "/apis", headers={"Accept": V2})
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("application/json;g=apidiscovery.k8s.io;v=v2")
    version = reply.json["items"][0]["versions"][0]
    resources = {r["resource"]: r for r in version["resources"]}
    wfr = resources["workflowruns"]
    assert wfr["responseKind"] == {"group": "plnt.work", "version": "v1", "kind": "WorkflowRun"}
    assert wfr["shortNames"] == ["wfr"] and wfr["categories"] == ["plnt"]
    subs = {s["subresource"]: s for s in wfr["subresources"]}
    assert subs["scale"]["responseKind"] == {
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
    }
    again = await api.call(
        "GET", "/apis", headers={"Accept": V2, "If-None-Match": reply.headers["ETag"]}
    )
    assert again.status == 304


async def test_legacy_discovery_lists_subresources_with_empty_singular_names(api: Api) -> None:
    groups = await api.call("GET", "/apis", headers={"Accept": "application/json"})
    assert groups.json["kind"] == "APIGroupList"
    listing = await api.call("GET", "/apis/plnt.work/v1")
    entries = {r["name"]: r for r in listing.json["resources"]}
    assert entries["workflowruns/scale"]["group"] == "autoscaling"
    assert entries["workflowruns/scale"]["singularName"] == ""
    assert entries["workflowruns"]["verbs"] == sorted(entries["workflowruns"]["verbs"])


async def test_openapi_v3_advertises_field_validation_and_not_strategic_merge(api: Api) -> None:
    root = await api.call("GET", "/openapi/v3")
    url = root.json["paths"]["apis/plnt.work/v1"]["serverRelativeURL"]
    doc = await api.call("GET", url, headers={"Accept": "application/json"})
    assert doc.headers["Cache-Control"] == "public, immutable"
    patch = doc.json["paths"]["/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/{name}"][
        "patch"
    ]
    assert patch["x-kubernetes-group-version-kind"]["kind"] == "WorkflowRun"
    assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in patch["parameters"])
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    stale = await api.call("GET", "/openapi/v3/apis/plnt.work/v1?hash=OLD")
    assert stale.status == 200
    assert "immutable" not in stale.headers["Cache-Control"]


async def test_create_sets_server_fields_and_refuses_a_duplicate(api: Api) -> None:
    obj = await create(api, "one")
    meta = obj["metadata"]
    assert isinstance(meta["resourceVersion"], str) and meta["generation"] == 1
    assert meta["creationTimestamp"].endswith("Z") and len(meta["uid"]) == 36
    assert obj["spec"]["target"] == "local"  # defaulted from the schema
    again = await api.call("POST", BASE, body=workflowrun("one"))
    assert again.status == 409
    assert again.json["reason"] == "AlreadyExists"
    assert again.json["message"] == 'workflowruns.plnt.work "one" already exists'


async def test_generate_name_makes_a_unique_name(api: Api) -> None:
    body = workflowrun("x")
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "gen-"
    first = await api.call("POST", BASE, body=body)
    second = await api.call("POST", BASE, body=body)
    assert first.status == second.status == 201
    names = {first.json["metadata"]["name"], second.json["metadata"]["name"]}
    assert len(names) == 2 and all(n.startswith("gen-") for n in names)


async def test_bodies_over_three_mebibytes_get_413_with_a_status(api: Api) -> None:
    big = b'{"pad":"' + b"x" * (3 * 1024 * 1024) + b'"}'
    reply = await api.call("POST", BASE, data=big, headers={"Content-Type": "application/json"})
    assert reply.status == 413
    assert reply.json["reason"] == "RequestEntityTooLarge"
    assert reply.json["message"] == "Request entity too large: limit is 3145728"


async def test_malformed_json_is_a_bad_request_and_changes_nothing(api: Api) -> None:
    reply = await api.call(
        "POST", BASE, data=b'{"kind": ', headers={"Content-Type": "application/json"}
    )
    assert reply.status == 400
    assert reply.json["kind"] == "Status" and reply.json["status"] == "Failure"
    listing = await api.call("GET", BASE)
    assert listing.json["items"] == []


async def test_invalid_spec_is_422_listing_every_field_error(api: Api) -> None:
    reply = await api.call("POST", BASE, body=workflowrun("bad", replicas=-2, target="moon"))
    assert reply.status == 422
    body = reply.json
    assert body["reason"] == "Invalid"
    assert body["details"]["kind"] == "WorkflowRun" and body["details"]["group"] == "plnt.work"
    fields = {c["field"] for c in body["details"]["causes"]}
    assert {"spec.replicas", "spec.target"} <= fields
    assert body["message"].startswith('WorkflowRun.plnt.work "bad" is invalid: [')


async def test_update_with_a_stale_resource_version_is_a_conflict(api: Api) -> None:
    obj = await create(api, "cas")
    obj["spec"]["replicas"] = 2
    first = await api.call("PUT", f"{BASE}/cas", body=obj)
    assert first.status == 200 and first.json["metadata"]["generation"] == 2
    obj["spec"]["replicas"] = 3
    stale = await api.call("PUT", f"{BASE}/cas", body=obj)
    assert stale.status == 409
    assert stale.json["message"] == (
        'Operation cannot be fulfilled on workflowruns.plnt.work "cas": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )


async def test_status_writes_keep_spec_and_generation_and_spec_writes_keep_status(api: Api) -> None:
    obj = await create(api, "st")
    obj["status"] = {"phase": "Ready", "replicas": 1}
    obj["spec"]["replicas"] = 7
    status = await api.call("PUT", f"{BASE}/st/status", body=obj)
    assert status.status == 200
    assert status.json["status"]["phase"] == "Ready"
    assert status.json["spec"]["replicas"] == 1 and status.json["metadata"]["generation"] == 1
    current = status.json
    current["status"] = {"phase": "Failed"}
    current["spec"]["replicas"] = 2
    main = await api.call("PUT", f"{BASE}/st", body=current)
    assert main.json["status"]["phase"] == "Ready"
    assert main.json["metadata"]["generation"] == 2


async def test_merge_patch_carrying_a_stale_resource_version_is_a_conflict(api: Api) -> None:
    obj = await create(api, "mp")
    rv = obj["metadata"]["resourceVersion"]
    ok = await api.call(
        "PATCH",
        f"{BASE}/mp",
        data=json.dumps({"metadata": {"resourceVersion": rv}, "spec": {"replicas": 2}}).encode(),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert ok.status == 200
    stale = await api.call(
        "PATCH",
        f"{BASE}/mp",
        data=json.dumps({"metadata": {"resourceVersion": rv}, "spec": {"replicas": 3}}).encode(),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert stale.status == 409


async def test_patch_types_outside_the_supported_set_are_refused(api: Api) -> None:
    await create(api, "pt")
    directive = await api.call(
        "PATCH",
        f"{BASE}/pt",
        data=b'{"spec":{"$patch":"replace"}}',
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert directive.status == 422
    assert "$patch" in directive.json["message"]
    apply = await api.call(
        "PATCH",
        f"{BASE}/pt?fieldManager=me&force=false",
        data=b"{}",
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert apply.status == 400 and apply.json["reason"] == "BadRequest"  # not a full object
    other = await api.call(
        "PATCH", f"{BASE}/pt", data=b"{}", headers={"Content-Type": "text/plain"}
    )
    assert other.status == 415


async def test_unknown_fields_warn_by_default_and_fail_when_strict(api: Api) -> None:
    body = workflowrun("uf")
    body["spec"]["colour"] = "blue"
    warned = await api.call("POST", BASE, body=body)
    assert warned.status == 201
    assert warned.headers.getall("Warning") == ['299 - "unknown field \\"spec.colour\\""']
    assert "colour" not in warned.json["spec"]
    body["metadata"]["name"] = "uf2"
    strict = await api.call("POST", BASE + "?fieldValidation=Strict", body=body)
    assert strict.status == 400
    assert 'strict decoding error: unknown field "spec.colour"' in strict.json["message"]


async def test_dry_run_create_and_delete_persist_nothing(api: Api) -> None:
    dry = await api.call("POST", BASE + "?dryRun=All", body=workflowrun("dry"))
    assert dry.status == 201
    assert (await api.call("GET", f"{BASE}/dry")).status == 404
    await create(api, "kept")
    deleted = await api.call("DELETE", f"{BASE}/kept?dryRun=All")
    assert deleted.status == 200
    assert (await api.call("GET", f"{BASE}/kept")).status == 200
    bad = await api.call("POST", BASE + "?dryRun=Some", body=workflowrun("d2"))
    assert bad.status == 422


async def test_delete_precondition_on_uid_is_a_conflict(api: Api) -> None:
    await create(api, "pre")
    reply = await api.call("DELETE", f"{BASE}/pre", body={"preconditions": {"uid": "nope"}})
    assert reply.status == 409
    assert "Precondition failed: UID in precondition: nope" in reply.json["message"]


async def test_list_pages_with_continue_at_one_resource_version(api: Api) -> None:
    for i in range(5):
        await create(api, f"page-{i}")
    first = await api.call("GET", BASE, params={"limit": "2"})
    token = first.json["metadata"]["continue"]
    rv = first.json["metadata"]["resourceVersion"]
    await create(api, "page-z")  # written between pages: must not appear
    names = [o["metadata"]["name"] for o in first.json["items"]]
    while token:
        page = await api.call("GET", BASE, params={"limit": "2", "continue": token})
        assert page.json["metadata"]["resourceVersion"] == rv
        names += [o["metadata"]["name"] for o in page.json["items"]]
        token = page.json["metadata"].get("continue")
    assert names == [f"page-{i}" for i in range(5)]


async def test_selectors_filter_lists_and_bad_selectors_are_400(api: Api) -> None:
    for name, tier in (("a", "gold"), ("b", "silver")):
        body = workflowrun(name)
        body["metadata"]["labels"] = {"tier": tier}
        assert (await api.call("POST", BASE, body=body)).status == 201
    gold = await api.call("GET", BASE, params={"labelSelector": "tier in (gold)"})
    assert [o["metadata"]["name"] for o in gold.json["items"]] == ["a"]
    by_name = await api.call("GET", BASE, params={"fieldSelector": "metadata.name=b"})
    assert [o["metadata"]["name"] for o in by_name.json["items"]] == ["b"]
    bad = await api.call("GET", BASE, params={"fieldSelector": "spec.colour=red"})
    assert bad.status == 400


async def test_table_rows_carry_partial_metadata_and_the_list_resource_version(api: Api) -> None:
    await create(api, "row")
    reply = await api.call("GET", BASE, headers={"Accept": TABLE})
    table = reply.json
    assert table["kind"] == "Table" and table["metadata"]["resourceVersion"]
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names[:7] == ["Name", "Workflow", "Backend", "Replicas", "Phase", "Revision", "Age"]
    assert table["columnDefinitions"][0]["format"] == "name"
    row = table["rows"][0]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["cells"][0] == "row"
    bad = await api.call("GET", BASE, headers={"Accept": TABLE}, params={"includeObject": "All"})
    assert bad.status == 400


async def test_partial_object_metadata_list_is_served_when_asked(api: Api) -> None:
    await create(api, "meta")
    accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    reply = await api.call("GET", BASE, headers={"Accept": accept})
    assert reply.json["kind"] == "PartialObjectMetadataList"
    assert "spec" not in reply.json["items"][0]


async def test_watch_resumes_after_a_disconnect_without_gaps(api: Api) -> None:
    first = await create(api, "w0")
    rv = first["metadata"]["resourceVersion"]
    async with api.session.get(
        api.url + BASE, params={"watch": "true", "resourceVersion": rv}
    ) as stream:
        assert stream.headers["Content-Type"] == "application/json"
        await create(api, "w1")
        events = await read_events(stream, 1)
    last_rv = events[0]["object"]["metadata"]["resourceVersion"]
    await create(api, "w2")  # happens while nobody watches
    await create(api, "w3")
    async with api.session.get(
        api.url + BASE, params={"watch": "true", "resourceVersion": last_rv}
    ) as stream:
        resumed = await read_events(stream, 2)
    assert [e["type"] for e in resumed] == ["ADDED", "ADDED"]
    assert [e["object"]["metadata"]["name"] for e in resumed] == ["w2", "w3"]


async def test_watch_from_a_compacted_revision_gets_one_410_error_event(
    uncached_api: Api,
) -> None:
    api = uncached_api
    old = await create(api, "c0")
    await create(api, "c1")
    latest = await create(api, "c2")
    async with EtcdStore(api.settings.etcd_endpoints[0]) as raw:
        await raw.compact(int(latest["metadata"]["resourceVersion"]))
    async with api.session.get(
        api.url + BASE,
        params={"watch": "true", "resourceVersion": old["metadata"]["resourceVersion"]},
    ) as stream:
        assert stream.status == 200
        events = await read_events(stream, 2)
    assert len(events) == 1
    assert events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"


async def test_send_initial_events_ends_with_the_annotated_bookmark(api: Api) -> None:
    await create(api, "i0")
    await create(api, "i1")
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "resourceVersion": "",
    }
    async with api.session.get(api.url + BASE, params=params) as stream:
        events = await read_events(stream, 3)
        await create(api, "i2")
        later = await read_events(stream, 1)
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    bookmark = events[2]["object"]["metadata"]
    assert bookmark["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert later[0]["type"] in ("ADDED", "BOOKMARK")
    refused = await api.call("GET", BASE, params={**params, "allowWatchBookmarks": "false"})
    assert refused.status == 422


async def test_watch_with_a_name_selector_sees_the_object_leave(api: Api) -> None:
    await create(api, "sel")
    params = {"watch": "true", "labelSelector": "keep=yes", "resourceVersion": "0"}
    body = workflowrun("sel2")
    body["metadata"]["labels"] = {"keep": "yes"}
    created = await api.call("POST", BASE, body=body)
    async with api.session.get(api.url + BASE, params=params) as stream:
        initial = await read_events(stream, 1)
        patch = json.dumps({"metadata": {"labels": {"keep": "no"}}}).encode()
        await api.call(
            "PATCH",
            f"{BASE}/sel2",
            data=patch,
            headers={"Content-Type": "application/merge-patch+json"},
        )
        left = await read_events(stream, 1)
    assert initial[0]["type"] == "ADDED" and created.status == 201
    assert left[0]["type"] == "DELETED"
    assert left[0]["object"]["metadata"]["name"] == "sel2"


async def test_health_needs_no_credentials_but_resources_do(api: Api) -> None:
    async with tls.client_session(api.pki) as anonymous:
        async with anonymous.get(api.url + "/readyz") as ready:
            assert ready.status == 200 and await ready.text() == "ok"
        async with anonymous.get(api.url + BASE) as denied:
            assert denied.status == 401
            body = await denied.json()
            assert body["reason"] == "Unauthorized"


async def test_viewers_read_but_cannot_write_and_spoofed_headers_are_ignored(
    api: Api, tmp_path: Any
) -> None:
    await create(api, "guarded")
    viewer = tls.write_client_cert(
        tls.client_ca(api.pki),
        tmp_path / "viewer",
        common_name="vera",
        organizations=["plnt:viewers"],
    )
    spoof = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
    async with tls.client_session(api.pki, cert=viewer) as session:
        async with session.get(api.url + f"{BASE}/guarded", headers=spoof) as got:
            assert got.status == 200
        async with session.delete(api.url + f"{BASE}/guarded", headers=spoof) as denied:
            assert denied.status == 403
            body = await denied.json()
    assert body["message"] == (
        'workflowruns.plnt.work "guarded" is forbidden: User "vera" cannot delete resource '
        '"workflowruns" in API group "plnt.work" in the namespace "default"'
    )


async def test_scale_subresource_speaks_autoscaling_v1(api: Api) -> None:
    await create(api, "sc")
    scale = await api.call("GET", f"{BASE}/sc/scale")
    assert scale.json["kind"] == "Scale" and scale.json["apiVersion"] == "autoscaling/v1"
    assert scale.json["spec"]["replicas"] == 1
    patched = await api.call(
        "PATCH",
        f"{BASE}/sc/scale",
        data=b'{"spec":{"replicas":4}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.json["kind"] == "Scale" and patched.json["spec"]["replicas"] == 4
    negative = await api.call(
        "PATCH",
        f"{BASE}/sc/scale",
        data=b'{"spec":{"replicas":-1}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert negative.status == 422


async def test_events_are_recorded_and_selectable_by_involved_object(api: Api) -> None:
    obj = await create(api, "ev")
    selector = (
        f"involvedObject.uid={obj['metadata']['uid']},involvedObject.name=ev,"
        "involvedObject.kind=WorkflowRun,involvedObject.namespace=default"
    )

    async def recorded() -> list[dict[str, Any]]:
        # The recorder writes Events off the request path, a moment after the create.
        events = await api.call(
            "GET", "/api/v1/namespaces/default/events", params={"fieldSelector": selector}
        )
        assert events.status == 200
        assert events.json["kind"] == "EventList"
        return list(events.json["items"])

    items = await eventually(recorded, within=10, what="the Accepted event of ev")
    assert [e["reason"] for e in items] == ["Accepted"]


async def test_metrics_count_requests_by_verb_resource_and_code(api: Api) -> None:
    await create(api, "m")
    await api.call("GET", f"{BASE}/missing")
    await api.call("GET", f"{BASE}/m/status")
    await api.call("GET", "/version")
    text = (await api.call("GET", "/metrics")).text
    status = 'group="plnt.work",resource="workflowruns",subresource="status",verb="get"'
    assert f'plnt_apiserver_requests_total{{code="200",{status}}} 1.0' in text
    assert f"plnt_apiserver_request_duration_seconds_count{{{status}}} 1.0" in text
    assert (
        'plnt_apiserver_requests_total{code="201",group="plnt.work",resource="workflowruns",'
        'subresource="",verb="create"} 1.0' in text
    )
    assert 'code="404",group="plnt.work",resource="workflowruns",subresource="",verb="get"' in text
    nonresource = 'code="200",group="",resource="",subresource="",verb="get"'
    assert f"plnt_apiserver_requests_total{{{nonresource}}}" in text


async def test_a_burst_of_changes_reaches_a_watcher_complete_and_in_order(api: Api) -> None:
    for i in range(3):
        await create(api, f"pre-{i}")
    async with api.session.get(
        api.url + BASE, params={"watch": "true", "resourceVersion": "0"}
    ) as stream:
        initial = await read_events(stream, 3)
        writes = [api.call("POST", BASE, body=workflowrun(f"burst-{i}")) for i in range(40)]
        replies = await asyncio.gather(*writes)
        assert all(r.status == 201 for r in replies)
        burst = await read_events(stream, 40)
    assert [e["object"]["metadata"]["name"] for e in initial] == ["pre-0", "pre-1", "pre-2"]
    revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in burst]
    assert revisions == sorted(revisions)
    assert {e["object"]["metadata"]["name"] for e in burst} == {f"burst-{i}" for i in range(40)}


async def test_readyz_fails_while_etcd_is_down(tmp_path: Path) -> None:
    async with (
        running_etcd(tmp_path / "own-etcd") as etcd,
        serving(etcd.endpoint, tmp_path) as own,
    ):
        assert (await own.call("GET", "/readyz")).text == "ok"
        await etcd.astop()
        down = await own.call("GET", "/readyz", params={"verbose": ""})
        assert down.status == 500
        assert "[-]etcd failed: reason withheld" in down.text
        assert down.text.endswith("readyz check failed\n")


async def test_metrics_include_etcd_latency_and_open_watches(api: Api) -> None:
    await create(api, "lat")
    async with api.session.get(api.url + BASE, params={"watch": "true"}) as stream:
        await read_events(stream, 1)
        text = (await api.call("GET", "/metrics")).text
    assert 'plnt_etcd_request_duration_seconds_count{operation="txn"}' in text
    assert 'plnt_apiserver_open_watches{resource="workflowruns"} 1.0' in text


async def test_a_malformed_json_patch_is_a_bad_request_and_too_many_operations_413(
    api: Api,
) -> None:
    await create(api, "jp")
    json_patch = {"Content-Type": "application/json-patch+json"}
    not_a_list = await api.call("PATCH", f"{BASE}/jp", data=b'"nope"', headers=json_patch)
    assert not_a_list.status == 400 and not_a_list.json["reason"] == "BadRequest"
    ops = [{"op": "test", "path": "/spec/replicas", "value": 1}] * 10_001
    too_many = await api.call("PATCH", f"{BASE}/jp", body=ops, headers=json_patch)
    assert too_many.status == 413
    failing = await api.call(
        "PATCH",
        f"{BASE}/jp",
        body=[{"op": "test", "path": "/spec/replicas", "value": 9}],
        headers=json_patch,
    )
    assert failing.status == 422 and failing.json["details"]["causes"][0]["field"] == "patch"
    assert (await api.call("GET", f"{BASE}/jp")).json["spec"]["replicas"] == 1


async def test_front_proxy_identity_is_trusted_only_with_the_front_proxy_certificate(
    api: Api,
) -> None:
    await create(api, "fp")
    as_alice = {"X-Remote-User": "alice", "X-Remote-Group": "plnt:viewers"}
    async with tls.client_session(api.pki, cert=tls.front_proxy(api.pki)) as proxy:
        async with proxy.get(api.url + f"{BASE}/fp", headers=as_alice) as got:
            assert got.status == 200
        async with proxy.delete(api.url + f"{BASE}/fp", headers=as_alice) as denied:
            assert denied.status == 403
            assert 'User "alice" cannot delete resource' in (await denied.json())["message"]
    async with (
        tls.client_session(api.pki) as no_cert,
        no_cert.get(api.url + f"{BASE}/fp", headers=as_alice) as anonymous,
    ):
        assert anonymous.status == 401


async def test_lists_at_a_compacted_revision_are_410_expired(api: Api) -> None:
    for i in range(3):
        await create(api, f"x{i}")
    first = await api.call("GET", BASE, params={"limit": "1"})
    token = first.json["metadata"]["continue"]
    rv = first.json["metadata"]["resourceVersion"]
    latest = await create(api, "x3")
    async with EtcdStore(api.settings.etcd_endpoints[0]) as raw:
        await raw.compact(int(latest["metadata"]["resourceVersion"]))
    stale_page = await api.call("GET", BASE, params={"limit": "1", "continue": token})
    assert stale_page.status == 410 and stale_page.json["reason"] == "Expired"
    exact = await api.call(
        "GET", BASE, params={"resourceVersion": rv, "resourceVersionMatch": "Exact"}
    )
    assert exact.status == 410 and exact.json["reason"] == "Expired"
    current = await api.call("GET", BASE)
    assert len(current.json["items"]) == 4


async def test_deletecollection_deletes_only_what_the_selector_matches(api: Api) -> None:
    for name, tier in (("dc-a", "gold"), ("dc-b", "gold"), ("dc-c", "silver")):
        body = workflowrun(name)
        body["metadata"]["labels"] = {"tier": tier}
        assert (await api.call("POST", BASE, body=body)).status == 201
    dry = await api.call("DELETE", BASE, params={"labelSelector": "tier=gold", "dryRun": "All"})
    assert dry.status == 200 and len(dry.json["items"]) == 2
    assert len((await api.call("GET", BASE)).json["items"]) == 3
    gone = await api.call("DELETE", BASE, params={"labelSelector": "tier=gold"})
    assert gone.status == 200
    assert gone.json["kind"] == "WorkflowRunList"
    assert sorted(o["metadata"]["name"] for o in gone.json["items"]) == ["dc-a", "dc-b"]
    left = await api.call("GET", BASE)
    assert [o["metadata"]["name"] for o in left.json["items"]] == ["dc-c"]


async def test_concurrent_patches_of_one_object_lose_no_update(api: Api) -> None:
    await create(api, "busy")
    merge = {"Content-Type": "application/merge-patch+json"}

    async def label(i: int) -> int:
        patch = json.dumps({"metadata": {"labels": {f"k{i}": "v"}}}).encode()
        reply = await api.call("PATCH", f"{BASE}/busy", data=patch, headers=merge)
        return reply.status

    statuses = await asyncio.gather(*(label(i) for i in range(25)))
    assert statuses == [200] * 25
    labels = (await api.call("GET", f"{BASE}/busy")).json["metadata"]["labels"]
    assert set(labels) == {f"k{i}" for i in range(25)}


async def test_a_watch_ends_by_itself_after_timeout_seconds(api: Api) -> None:
    await create(api, "t0")
    params = {"watch": "true", "resourceVersion": "0", "timeoutSeconds": "1"}
    async with api.session.get(api.url + BASE, params=params) as stream:
        async with asyncio.timeout(15):
            body = await stream.read()  # returns only when the server ends the stream
    lines = [json.loads(line) for line in body.splitlines() if line]
    assert [e["type"] for e in lines] == ["ADDED"]


async def test_malformed_yaml_is_a_bad_request_naming_the_position(api: Api) -> None:
    reply = await api.call(
        "POST",
        BASE,
        data=b"metadata: {name: [unclosed\n",
        headers={"Content-Type": "application/yaml"},
    )
    assert reply.status == 400 and reply.json["reason"] == "BadRequest"
    assert "line" in reply.json["message"]
    good = await api.call(
        "POST",
        BASE,
        data=(
            b"apiVersion: plnt.work/v1\nkind: WorkflowRun\nmetadata: {name: y}\n"
            b"spec: {workflow: {ref: 'oci://r/w:1', digest: 'sha256:" + b"e" * 64 + b"'}}\n"
        ),
        headers={"Content-Type": "application/yaml"},
    )
    assert good.status == 201 and good.json["metadata"]["name"] == "y"
