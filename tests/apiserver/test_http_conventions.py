"""HTTP conventions a kubectl user meets indirectly, as kube-apiserver keeps them: HEAD
answers like GET, unknown paths get the plain-text 404, every answer says
`Cache-Control: no-cache, private`, and a body labelled `*/*` is read as JSON.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.api_server import BASE, Api, workflowrun


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
    for odd in ("a%0Ab", "a%0Db"):  # a line break in a name is still a resource path
        broken = await api.call("GET", f"{BASE}/{odd}")
        assert broken.status == 404 and broken.json["kind"] == "Status", broken.text
    assert not_found.headers["Cache-Control"] == "no-cache, private"
    bad = await api.call("GET", BASE, params={"labelSelector": "a in ("})
    assert bad.status == 400 and bad.headers["Cache-Control"] == "no-cache, private"
    ok = await api.call("GET", BASE)
    assert ok.headers["Cache-Control"] == "no-cache, private"


async def test_a_body_labelled_any_type_is_read_as_json(api: Api) -> None:
    reply = await api.call(
        "POST",
        BASE,
        data=json.dumps(workflowrun("star")).encode(),
        headers={"Content-Type": "*/*"},
    )
    assert reply.status == 201, reply.text
    assert reply.json["metadata"]["name"] == "star"
