"""Malformed query parameters are refused before anything is done, in kube-apiserver's words.

A value that does not convert (an integer that is not one, a boolean that is
neither) is a 400 naming the parameter; a value that converts but is not allowed is
kube's 422 on the options kind (`DeleteOptions.meta.k8s.io "" is invalid: ...`). In
every case the object is left as it was: not deleted, not created, not changed.
Each table row is a request over real HTTPS against a real etcd.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from tests.support.api_server import BASE, Api, workflowrun

MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}


@dataclass(frozen=True)
class Row:
    """One malformed request: its query, the status kube answers, and words of the message."""

    query: dict[str, str]
    status: int
    says: str

    def __str__(self) -> str:
        return f"{self.query} -> {self.status}"


def bad_int(name: str, value: str, why: str = "invalid syntax") -> Row:
    return Row(
        {name: value},
        400,
        f'{name}: Invalid value: "{value}": strconv.ParseInt: parsing "{value}": {why}',
    )


def bad_bool(name: str, value: str) -> Row:
    return Row({name: value}, 400, f'{name}: Invalid value: "{value}": must be a boolean')


def assert_refused(reply: Any, row: Row) -> None:
    assert reply.status == row.status, f"{row}: {reply.status} {reply.text}"
    body = reply.json
    assert body["kind"] == "Status" and body["code"] == row.status, f"{row}: {body}"
    assert row.says in body["message"], f"{row}: {body['message']!r}"


async def create(api: Api, name: str) -> dict[str, Any]:
    reply = await api.call("POST", BASE, body=workflowrun(name))
    assert reply.status == 201, reply.text
    return dict(reply.json)


async def assert_unchanged(api: Api, name: str, before: dict[str, Any], row: Row) -> None:
    now = await api.call("GET", f"{BASE}/{name}")
    assert now.status == 200, f"{row}: the object is gone: {now.text}"
    meta = now.json["metadata"]
    assert meta["resourceVersion"] == before["metadata"]["resourceVersion"], f"{row}: changed"
    assert "deletionTimestamp" not in meta, f"{row}: deletion started"


DELETE_ROWS = [
    bad_int("gracePeriodSeconds", "abc"),
    bad_int("gracePeriodSeconds", "1.5"),
    bad_int("gracePeriodSeconds", " 1"),
    bad_int("gracePeriodSeconds", "99999999999999999999", "value out of range"),
    bad_bool("orphanDependents", "maybe"),
    Row({"pretty": "yes"}, 400, 'pretty: Invalid value: "yes": strconv.ParseBool'),
    Row(
        {"propagationPolicy": "Sideways"},
        422,
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
        '"Sideways": supported values: "Foreground", "Background", "Orphan", "nil"',
    ),
    Row(
        {"orphanDependents": "true", "propagationPolicy": "Orphan"},
        422,
        'propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation '
        "cannot be both set",
    ),
    Row({"dryRun": "Some"}, 422, 'dryRun: Unsupported value: ["Some"]: supported values: "All"'),
]


async def test_a_delete_with_a_malformed_parameter_is_refused_and_deletes_nothing(
    api: Api,
) -> None:
    before = await create(api, "victim")
    for row in DELETE_ROWS:
        reply = await api.call("DELETE", f"{BASE}/victim", params=row.query)
        assert_refused(reply, row)
        await assert_unchanged(api, "victim", before, row)
    # The same request, well formed, acts: the table above could have deleted.
    done = await api.call("DELETE", f"{BASE}/victim", params={"gracePeriodSeconds": "0"})
    assert done.status == 200, done.text
    assert (await api.call("GET", f"{BASE}/victim")).status == 404


async def test_a_delete_collection_with_a_malformed_parameter_deletes_nothing(api: Api) -> None:
    before = await create(api, "member")
    rows = [
        bad_int("gracePeriodSeconds", "abc"),
        bad_int("limit", "ten"),
        Row({"labelSelector": "a b"}, 400, "unable to parse requirement"),
    ]
    for row in rows:
        reply = await api.call("DELETE", BASE, params=row.query)
        assert_refused(reply, row)
        await assert_unchanged(api, "member", before, row)


async def test_delete_query_preconditions_are_honoured_as_kube_reads_them(api: Api) -> None:
    before = await create(api, "guarded")
    row = Row({"uid": "not-the-uid"}, 409, "Precondition failed: UID in precondition")
    reply = await api.call("DELETE", f"{BASE}/guarded", params=row.query)
    assert reply.status == 409, reply.text
    await assert_unchanged(api, "guarded", before, row)
    uid = before["metadata"]["uid"]
    done = await api.call("DELETE", f"{BASE}/guarded", params={"uid": uid})
    assert done.status == 200, done.text


WRITE_ROWS = [
    Row(
        {"fieldValidation": "Loose"},
        422,
        'fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", '
        '"Strict", "Warn"',
    ),
    Row({"dryRun": "true"}, 422, 'dryRun: Unsupported value: ["true"]: supported values: "All"'),
    Row({"fieldManager": "m" * 129}, 422, "fieldManager: Too long: may not be more than 128 bytes"),
    Row(
        {"fieldManager": "a\x01b"},
        422,
        'fieldManager: Invalid value: "a\\x01b": invalid character U+0001 (at position 1)',
    ),
    Row({"pretty": "maybe"}, 400, 'pretty: Invalid value: "maybe"'),
]


async def test_a_create_with_a_malformed_parameter_creates_nothing(api: Api) -> None:
    for row in WRITE_ROWS:
        reply = await api.call("POST", BASE, params=row.query, body=workflowrun("never"))
        assert_refused(reply, row)
        if row.status == 422:
            assert 'CreateOptions.meta.k8s.io "" is invalid' in reply.json["message"], row
        assert (await api.call("GET", f"{BASE}/never")).status == 404, row


async def test_an_update_or_patch_with_a_malformed_parameter_changes_nothing(api: Api) -> None:
    before = await create(api, "steady")
    changed = workflowrun("steady", replicas=4)
    changed["metadata"]["resourceVersion"] = before["metadata"]["resourceVersion"]
    for row in WRITE_ROWS:
        reply = await api.call("PUT", f"{BASE}/steady", params=row.query, body=changed)
        assert_refused(reply, row)
        if row.status == 422:
            assert 'UpdateOptions.meta.k8s.io "" is invalid' in reply.json["message"], row
        await assert_unchanged(api, "steady", before, row)
    patch_rows = [
        *WRITE_ROWS,
        bad_bool("force", "abc"),
        Row({"force": "false"}, 422, "force: Forbidden: may not be specified for non-apply patch"),
    ]
    for row in patch_rows:
        reply = await api.call(
            "PATCH",
            f"{BASE}/steady",
            params=row.query,
            data=b'{"spec":{"replicas":4}}',
            headers=MERGE,
        )
        assert_refused(reply, row)
        if row.status == 422:
            assert 'PatchOptions.meta.k8s.io "" is invalid' in reply.json["message"], row
        await assert_unchanged(api, "steady", before, row)
    apply_rows = [
        Row({"fieldManager": "me", "force": "perhaps"}, 400, 'force: Invalid value: "perhaps"'),
        Row({}, 422, "fieldManager: Required value: is required for apply patch"),
    ]
    for row in apply_rows:
        reply = await api.call(
            "PATCH",
            f"{BASE}/steady",
            params=row.query,
            data=b'{"apiVersion":"plnt.work/v1","kind":"WorkflowRun","spec":{"replicas":4}}',
            headers=APPLY,
        )
        assert_refused(reply, row)
        await assert_unchanged(api, "steady", before, row)


LIST_ROWS = [
    bad_int("limit", "ten"),
    bad_int("limit", "1.5"),
    bad_int("timeoutSeconds", "abc"),
    bad_int("timeoutSeconds", "30s"),
    bad_bool("watch", "maybe"),
    bad_bool("allowWatchBookmarks", "yes"),
    bad_bool("sendInitialEvents", "si"),
    Row(
        {"resourceVersion": "abc"},
        400,
        'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax',
    ),
    Row({"resourceVersion": "-1"}, 400, 'resourceVersion: Invalid value: "-1"'),
    Row(
        {"resourceVersion": "5", "resourceVersionMatch": "Newest"},
        422,
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Unsupported value: '
        '"Newest": supported values: "Exact", "NotOlderThan", ""',
    ),
    Row(
        {"resourceVersion": "5", "resourceVersionMatch": "Exact", "continue": "x"},
        422,
        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is "
        "provided",
    ),
    Row(
        {"sendInitialEvents": "false"},
        422,
        "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
    ),
    Row({"labelSelector": "a b"}, 400, "unable to parse requirement"),
    Row({"fieldSelector": "spec.nothing=1"}, 400, "field label not supported: spec.nothing"),
    Row({"continue": "not-a-token"}, 400, "invalid continue token"),
    Row({"limit": "abc", "watch": "true"}, 400, "limit: Invalid value"),
    Row(
        {"watch": "1", "timeoutSeconds": "soon"},
        400,
        'timeoutSeconds: Invalid value: "soon": strconv.ParseInt',
    ),
    Row(
        {"watch": "true", "resourceVersionMatch": "NotOlderThan"},
        422,
        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
    ),
]


async def test_a_list_or_watch_with_a_malformed_parameter_is_refused_naming_it(api: Api) -> None:
    await create(api, "listed")
    for row in LIST_ROWS:
        reply = await api.call("GET", BASE, params=row.query)
        assert_refused(reply, row)
    for name in ("labelSelector", "fieldSelector"):
        bad = "a b" if name == "labelSelector" else "spec.nothing=1"
        reply = await api.call("GET", BASE, params={name: bad})
        assert reply.json["details"]["causes"][0]["field"] == name


async def test_a_get_with_a_malformed_resource_version_is_refused(api: Api) -> None:
    await create(api, "read")
    reply = await api.call("GET", f"{BASE}/read", params={"resourceVersion": "abc"})
    assert_refused(reply, Row({}, 400, 'resourceVersion: Invalid value: "abc"'))
    assert reply.json["details"]["causes"][0]["field"] == "resourceVersion"


async def test_well_formed_values_still_work_unknown_parameters_are_ignored_and_first_wins(
    api: Api,
) -> None:
    await create(api, "a1")
    await create(api, "a2")
    tolerant = await api.call(
        "GET", BASE, params={"timeout": "32s", "bogus": "1", "limit": "1", "pretty": "true"}
    )
    assert tolerant.status == 200 and len(tolerant.json["items"]) == 1, tolerant.text
    first_wins = await api.call("GET", f"{BASE}?limit=1&limit=abc")
    assert first_wins.status == 200 and len(first_wins.json["items"]) == 1, first_wins.text
    first_refused = await api.call("GET", f"{BASE}?limit=abc&limit=1")
    assert first_refused.status == 400, first_refused.text
    negative = await api.call("GET", BASE, params={"limit": "-3", "watch": "FALSE"})
    assert negative.status == 200 and len(negative.json["items"]) == 2, negative.text
    # A bare `?watch` is a watch, as in kube; a negative timeout ends it at once (not in
    # 30-60 minutes: the deadline below would fail first).
    async with api.session.get(f"{api.url}{BASE}?watch&timeoutSeconds=-1") as stream:
        assert stream.status == 200
        await asyncio.wait_for(stream.read(), timeout=30)
    async with api.session.get(f"{api.url}{BASE}?watch&timeoutSeconds=5") as stream:
        first_line = await stream.content.readline()
    assert b'"ADDED"' in first_line
