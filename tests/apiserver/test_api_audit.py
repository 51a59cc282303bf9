"""HTTP details a kubectl user meets indirectly, checked against kube-apiserver's behaviour:
HEAD, plain 404s, Cache-Control on every answer, health and version documents, the
open-watches gauge, self reviews (`kubectl auth can-i` / `whoami`, JSON and protobuf),
permissive body media types, and the Event table's columns.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from tests.apiserver.conftest import BASE, Api, workflowrun
from tests.support import tls

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


async def create(api: Api, name: str) -> dict[str, Any]:
    reply = await api.call("POST", BASE, body=workflowrun(name))
    assert reply.status == 201, reply.text
    return dict(reply.json)


async def test_head_answers_like_get_without_a_body(api: Api) -> None:
    await create(api, "hd")
    for path in (f"{BASE}/hd", BASE, "/version"):
        got = await api.call("GET", path)
        head = await api.call("HEAD", path)
        assert head.status == got.status == 200
        assert head.text == ""
        assert head.headers["Content-Type"] == got.headers["Content-Type"] == "application/json"
    missing = await api.call("HEAD", f"{BASE}/nope")
    assert missing.status == 404


async def test_unknown_paths_get_the_plain_404_and_every_answer_has_cache_control(
    api: Api,
) -> None:
    unknown = await api.call("GET", "/no/such/thing")
    assert unknown.status == 404
    assert unknown.text == "404 page not found\n"
    assert unknown.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert unknown.headers["Cache-Control"] == "no-cache, private"
    not_found = await api.call("GET", f"{BASE}/absent")
    assert not_found.status == 404 and not_found.json["reason"] == "NotFound"
    assert not_found.headers["Cache-Control"] == "no-cache, private"
    bad = await api.call("GET", BASE, params={"labelSelector": "a in ("})
    assert bad.status == 400 and bad.headers["Cache-Control"] == "no-cache, private"
    ok = await api.call("GET", BASE)
    assert ok.headers["Cache-Control"] == "no-cache, private"


async def test_health_endpoints_list_checks_when_verbose_and_honour_exclude(api: Api) -> None:
    plain = await api.call("GET", "/livez")
    assert plain.text == "ok" and plain.headers["Content-Type"] == "text/plain; charset=utf-8"
    verbose = await api.call("GET", "/healthz?verbose")
    assert verbose.text.splitlines() == [
        "[+]ping ok",
        "[+]etcd ok",
        "[+]watch-cache ok",
        "healthz check passed",
    ]
    excluded = await api.call("GET", "/readyz?verbose&exclude=etcd")
    assert "[+]etcd excluded: ok" in excluded.text.splitlines()


async def test_version_is_semver_like_and_matches_major_and_minor(api: Api) -> None:
    info = (await api.call("GET", "/version")).json
    found = re.fullmatch(r"v(\d+)\.(\d+)\.\d+(-[0-9A-Za-z.]+)?", info["gitVersion"])
    assert found is not None, info
    assert (info["major"], info["minor"]) == (found.group(1), found.group(2))
    expected = {"major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate"}
    assert expected | {"goVersion", "compiler", "platform"} == set(info)


def _metric(text: str, name: str, labels: str) -> float:
    found = re.search(rf"^{name}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_open_watches_gauge_moves_with_a_watch_and_a_closed_watch_counts_as_200(
    api: Api,
) -> None:
    gauge = 'resource="workflowruns"'
    ended = 'code="200",resource="workflowruns",verb="watch"'

    async def metrics() -> str:
        return (await api.call("GET", "/metrics")).text

    assert _metric(await metrics(), "plnt_apiserver_open_watches", gauge) == 0
    async with api.session.get(api.url + BASE, params={"watch": "true"}) as stream:
        assert stream.status == 200
        assert _metric(await metrics(), "plnt_apiserver_open_watches", gauge) == 1
    async with asyncio.timeout(10):
        while True:
            text = await metrics()
            if _metric(text, "plnt_apiserver_open_watches", gauge) == 0:
                break
            await asyncio.sleep(0.02)  # poll: the server notices the disconnect on its own
        while _metric(text, "plnt_apiserver_requests_total", ended) < 1:
            await asyncio.sleep(0.02)
            text = await metrics()
    assert 'verb="watch"} ' not in "".join(
        line for line in text.splitlines() if 'code="500"' in line
    )


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (lengths here stay below 128)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _protobuf_ssar(**attributes: str) -> bytes:
    order = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
    inner = b"".join(
        _field(order.index(key) + 1, value.encode()) for key, value in attributes.items()
    )
    review = _field(2, _field(1, inner))  # spec.resourceAttributes
    type_meta = _field(1, b"authorization.k8s.io/v1") + _field(2, b"SelfSubjectAccessReview")
    return b"k8s\x00" + _field(1, type_meta) + _field(2, review)


async def test_self_subject_access_review_answers_in_json_and_protobuf(api: Api) -> None:
    body = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": {
            "resourceAttributes": {
                "namespace": "default",
                "verb": "delete",
                "group": "plnt.work",
                "resource": "workflowruns",
            }
        },
    }
    reply = await api.call("POST", SSAR, body=body)
    assert reply.status == 201
    assert reply.json["kind"] == "SelfSubjectAccessReview"
    assert reply.json["status"] == {"allowed": True}
    assert reply.json["spec"] == body["spec"]
    proto = await api.call(
        "POST",
        SSAR,
        data=_protobuf_ssar(namespace="default", verb="get", group="plnt.work", resource="x"),
        headers={
            "Content-Type": "application/vnd.kubernetes.protobuf",
            "Accept": "application/vnd.kubernetes.protobuf,application/json",
        },
    )
    assert proto.status == 201 and proto.headers["Content-Type"] == "application/json"
    assert proto.json["spec"]["resourceAttributes"] == {
        "namespace": "default",
        "verb": "get",
        "group": "plnt.work",
        "resource": "x",
    }
    empty = await api.call("POST", SSAR, body={"spec": {}})
    assert empty.status == 422 and empty.json["reason"] == "Invalid"
    other = await api.call("POST", SSAR, data=b"x", headers={"Content-Type": "text/plain"})
    assert other.status == 415


async def test_a_viewer_may_review_itself_and_learns_what_it_may_not_do(
    api: Api, tmp_path: Path
) -> None:
    viewer = tls.write_client_cert(
        tls.client_ca(api.pki), tmp_path / "v", common_name="vic", organizations=["plnt:viewers"]
    )

    def review(verb: str) -> bytes:
        attributes = {"namespace": "default", "verb": verb, "group": "plnt.work"}
        attributes["resource"] = "workflowruns"
        return json.dumps({"spec": {"resourceAttributes": attributes}}).encode()

    async with tls.client_session(api.pki, cert=viewer) as session:
        headers = {"Content-Type": "application/json"}
        async with session.post(api.url + SSAR, data=review("list"), headers=headers) as reply:
            assert reply.status == 201
            assert (await reply.json())["status"]["allowed"] is True
        async with session.post(api.url + SSAR, data=review("delete"), headers=headers) as reply:
            assert reply.status == 201
            assert (await reply.json())["status"]["allowed"] is False
        async with session.post(api.url + SSR, data=b"{}", headers=headers) as reply:
            assert reply.status == 201
            who = (await reply.json())["status"]["userInfo"]
    assert who["username"] == "vic"
    assert who["groups"] == ["plnt:viewers", "system:authenticated"]


async def test_a_body_labelled_any_type_is_read_as_json(api: Api) -> None:
    reply = await api.call(
        "POST",
        BASE,
        data=json.dumps(workflowrun("star")).encode(),
        headers={"Content-Type": "*/*"},
    )
    assert reply.status == 201, reply.text
    assert reply.json["metadata"]["name"] == "star"


async def test_event_tables_use_kubes_event_columns(api: Api) -> None:
    obj = await create(api, "evt")
    path = "/api/v1/namespaces/default/events"
    async with asyncio.timeout(10):
        while True:
            table = (await api.call("GET", path, headers={"Accept": TABLE})).json
            if table["rows"]:
                break
            await asyncio.sleep(0.02)  # poll: the recorder writes off the request path
    columns = [(c["name"], c["priority"], c["format"]) for c in table["columnDefinitions"]]
    assert columns == [
        ("Last Seen", 0, ""),
        ("Type", 0, ""),
        ("Reason", 0, ""),
        ("Object", 0, ""),
        ("Subobject", 1, ""),
        ("Source", 1, ""),
        ("Message", 0, ""),
        ("First Seen", 1, ""),
        ("Count", 1, ""),
        ("Name", 1, "name"),
    ]
    cells = table["rows"][0]["cells"]
    assert cells[1:4] == ["Normal", "Accepted", "workflowrun/evt"]
    assert cells[5] == "plnt" and cells[8] == 1
    assert cells[9].startswith("evt.") and re.fullmatch(r"\d+s", cells[0])
    assert table["rows"][0]["object"]["metadata"]["namespace"] == "default"
    assert obj["metadata"]["uid"]
