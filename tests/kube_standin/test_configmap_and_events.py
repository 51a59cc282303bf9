"""The authentication ConfigMap (get and watch) and Events through both Event APIs."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.support.kube import authconfig, policy, standin
from tests.support.kube.clients import post, session
from tests.support.waiting import eventually

CM_PATH = "/api/v1/namespaces/kube-system/configmaps"


def reader(kube: standin.KubeStandIn, user: str) -> None:
    kube.allow(
        policy.Rule(
            verbs=("get", "list", "watch"),
            user=user,
            api_groups=("",),
            resources=("configmaps",),
            names=(authconfig.NAME,),
            namespace="kube-system",
            name="extension-apiserver-authentication-reader",
        )
    )


async def test_the_authentication_configmap_holds_kubes_keys_and_a_watch_delivers_its_replacement(
    kube: standin.KubeStandIn, token: str
) -> None:
    kube.add_user(token, "reader-sa")
    reader(kube, "reader-sa")
    query = {"fieldSelector": f"metadata.name={authconfig.NAME}"}
    async with session(kube, token) as client:
        async with client.get(CM_PATH, params=query) as response:
            listed = await response.json()
        data = listed["items"][0]["data"]
        assert json.loads(data["requestheader-allowed-names"]) == ["front-proxy-client"]
        assert data["requestheader-username-headers"] == '["X-Remote-User"]'
        assert data["requestheader-client-ca-file"] == kube.front_proxy_ca_cert.read_text()
        watch_query = {
            **query,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
            "timeoutSeconds": "3",
        }
        async with client.get(
            CM_PATH, params=watch_query, timeout=aiohttp.ClientTimeout(total=30)
        ) as watch:
            assert watch.headers["Content-Type"].startswith("application/json")
            first = json.loads(await watch.content.readline())
            bookmark = json.loads(await watch.content.readline())
            kube.rotate_front_proxy_ca()
            changed = json.loads(await watch.content.readline())
            assert await watch.content.read() == b""  # the server ends the watch at timeoutSeconds
    assert first["type"] == "ADDED"
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert changed["type"] == "MODIFIED"
    assert (
        changed["object"]["data"]["requestheader-client-ca-file"]
        == kube.front_proxy_ca_cert.read_text()
    )
    assert int(changed["object"]["metadata"]["resourceVersion"]) > int(
        first["object"]["metadata"]["resourceVersion"]
    )


def event_writer(kube: standin.KubeStandIn, user: str) -> None:
    kube.allow(
        policy.Rule(
            verbs=("*",),
            user=user,
            api_groups=("", "events.k8s.io"),
            resources=("events",),
            name="event-writer",
        )
    )


async def test_events_written_through_one_api_are_read_through_the_other_as_kube_converts_them(
    kube: standin.KubeStandIn, token: str
) -> None:
    kube.add_user(token, "recorder")
    event_writer(kube, "recorder")
    kube.add_namespace("ev-ns")
    regarding = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "name": "summarize",
        "namespace": "ev-ns",
        "uid": "u1",
    }
    new_event: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "summarize.1", "namespace": "ev-ns"},
        "eventTime": "2026-07-01T10:00:00.000000Z",
        "reportingController": "plnt.work/apiserver",
        "reportingInstance": "plnt-0",
        "action": "Deploy",
        "reason": "Deploying",
        "type": "Normal",
        "regarding": regarding,
        "note": "deploying summarize",
    }
    async with session(kube, token) as client:
        code, created = await post(
            client, "/apis/events.k8s.io/v1/namespaces/ev-ns/events", new_event
        )
        assert code == 201, created
        selector = (
            "involvedObject.kind=WorkflowRun,involvedObject.name=summarize,"
            "involvedObject.namespace=ev-ns"
        )
        async with client.get(
            "/api/v1/namespaces/ev-ns/events", params={"fieldSelector": selector}
        ) as response:
            core = await response.json()
        patch = {"series": {"count": 2, "lastObservedTime": "2026-07-01T10:00:05.000000Z"}}
        async with client.patch(
            "/apis/events.k8s.io/v1/namespaces/ev-ns/events/summarize.1",
            data=json.dumps(patch),
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        ) as response:
            patched = await response.json()  # fmt: skip
        async with client.get(
            "/apis/events.k8s.io/v1/namespaces/ev-ns/events",
            params={"fieldSelector": "regarding.name=summarize"},
        ) as response:
            by_regarding = await response.json()  # fmt: skip
        legacy = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "old.1", "namespace": "ev-ns"},
            "involvedObject": regarding,
            "reason": "Old",
            "message": "core event",
            "count": 3,
            "firstTimestamp": "2026-07-01T09:00:00Z",
            "lastTimestamp": "2026-07-01T09:05:00Z",
            "source": {"component": "plnt"},
            "type": "Warning",
        }
        _, old = await post(client, "/api/v1/namespaces/ev-ns/events", legacy)
        async with client.get("/apis/events.k8s.io/v1/namespaces/ev-ns/events/old.1") as response:
            old_as_v1 = await response.json()
        bad = {**new_event, "metadata": {"name": "bad.1"}, "count": 2}
        bad_code, bad_body = await post(
            client, "/apis/events.k8s.io/v1/namespaces/ev-ns/events", bad
        )
        missing_code, _ = await post(client, "/api/v1/namespaces/no-such-ns/events", legacy)
    assert core["kind"] == "EventList" and [e["message"] for e in core["items"]] == [
        "deploying summarize"
    ]
    assert core["items"][0]["involvedObject"] == regarding
    assert core["items"][0]["reportingComponent"] == "plnt.work/apiserver"
    assert patched["series"]["count"] == 2
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert [e["metadata"]["name"] for e in by_regarding["items"]] == ["summarize.1"]
    assert old_as_v1["deprecatedCount"] == 3 and old_as_v1["deprecatedSource"] == {
        "component": "plnt"
    }
    assert old_as_v1["note"] == "core event" and old_as_v1["regarding"] == regarding
    assert int(old["metadata"]["resourceVersion"]) > int(patched["metadata"]["resourceVersion"])
    assert bad_code == 422 and bad_body["details"]["causes"][0]["field"] == "count"
    assert missing_code == 404
    stored = await eventually(
        lambda: [e["metadata"]["name"] for e in kube.events("ev-ns")], what="stored events"
    )
    assert stored == ["old.1", "summarize.1"]
