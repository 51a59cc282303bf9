"""GET, LIST and watch answer one encoding of an object per resourceVersion, over HTTPS.

The server keeps a served object's JSON once per resourceVersion (`plnt.registry.served`).
These tests check what a client reads: the same bytes for the same object however it
is read, new bytes as soon as the object changes (or is deleted and created again under
the same name), the compact encoding with the key order the server always wrote, and the
per-request representations (Table, PartialObjectMetadata) still built per request.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from plnt.api import codec
from tests.support.api_server import BASE, Api, workflowrun

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"


async def get_text(api: Api, name: str, **params: str) -> str:
    reply = await api.call("GET", f"{BASE}/{name}", params=params or None)
    assert reply.status == 200, reply.text
    assert reply.headers["Content-Type"] == "application/json"
    return reply.text


async def create(api: Api, name: str, **spec: Any) -> dict[str, Any]:
    reply = await api.call("POST", BASE, body=workflowrun(name, **spec))
    assert reply.status == 201, reply.text
    created: dict[str, Any] = reply.json
    return created


async def patch(api: Api, name: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = await api.call(
        "PATCH",
        f"{BASE}/{name}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert reply.status == 200, reply.text
    patched: dict[str, Any] = reply.json
    return patched


async def test_a_get_is_the_compact_encoding_in_the_servers_key_order(api: Api) -> None:
    created = await create(api, "shape", replicas=2)
    text = await get_text(api, "shape")
    obj = json.loads(text)
    assert text.encode() == codec.dumps(obj)  # compact, nothing added or reordered
    assert list(obj) == sorted(obj)  # stored sorted, so served sorted
    assert list(obj["metadata"])[-1] == "resourceVersion"
    assert obj == created
    assert await get_text(api, "shape") == text
    assert await get_text(api, "shape", resourceVersion="0") == text


async def test_a_get_after_an_update_answers_the_new_object(api: Api) -> None:
    await create(api, "moving", replicas=1)
    first = json.loads(await get_text(api, "moving"))
    patched = await patch(api, "moving", {"spec": {"replicas": 3}})
    after = json.loads(await get_text(api, "moving"))
    assert after == patched
    assert after["spec"]["replicas"] == 3
    assert after["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    status = json.loads(await get_text(api, "moving/status"))
    assert status == after


async def test_a_deleted_and_recreated_name_answers_the_new_object(api: Api) -> None:
    old = await create(api, "again", replicas=1)
    assert json.loads(await get_text(api, "again")) == old
    reply = await api.call("DELETE", f"{BASE}/again")
    assert reply.status == 200, reply.text
    new = await create(api, "again", replicas=4)
    answered = json.loads(await get_text(api, "again"))
    assert answered == new
    assert answered["metadata"]["uid"] != old["metadata"]["uid"]


async def test_a_list_item_is_byte_for_byte_its_get(api: Api) -> None:
    for name in ("li-a", "li-b"):
        await create(api, name)
    reply = await api.call("GET", BASE)
    assert reply.status == 200, reply.text
    listed = reply.json
    assert list(listed) == ["kind", "apiVersion", "metadata", "items"]
    assert reply.text.encode() == codec.dumps(listed)
    for name in ("li-a", "li-b"):
        assert await get_text(api, name) in reply.text
    limited = await api.call("GET", BASE, params={"limit": "1"})
    page = limited.json
    assert page["metadata"]["continue"]
    assert limited.text.encode() == codec.dumps(page)
    assert len(page["items"]) == 1


async def test_a_watch_events_object_is_the_get_at_its_resource_version(api: Api) -> None:
    await create(api, "watched", replicas=1)
    start = json.loads(await get_text(api, "watched"))["metadata"]["resourceVersion"]
    params = {"watch": "true", "resourceVersion": start, "fieldSelector": ""}
    async with api.session.get(api.url + BASE, params=params) as stream:
        assert stream.status == 200
        patched = await patch(api, "watched", {"spec": {"replicas": 2}})
        async with asyncio.timeout(20):
            line = await stream.content.readline()
    assert json.loads(line)["type"] == "MODIFIED"
    text = await get_text(api, "watched")
    assert json.loads(text) == patched
    assert line == b'{"type":"MODIFIED","object":' + text.encode() + b"}\n"


async def test_table_and_partial_metadata_are_built_per_request(api: Api) -> None:
    await create(api, "shown")
    plain = json.loads(await get_text(api, "shown"))
    table = await api.call("GET", f"{BASE}/shown", headers={"Accept": TABLE})
    assert table.status == 200, table.text
    assert table.json["kind"] == "Table"
    assert table.json["rows"][0]["cells"][0] == "shown"
    assert table.json["rows"][0]["object"]["metadata"] == plain["metadata"]
    partial = await api.call("GET", f"{BASE}/shown", headers={"Accept": PARTIAL})
    assert partial.status == 200, partial.text
    assert partial.json == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": plain["metadata"],
    }
    assert json.loads(await get_text(api, "shown")) == plain
