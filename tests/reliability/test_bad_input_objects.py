"""Bad objects through real HTTP to a real API server over etcd: refused as kube refuses them,
and nothing changes.

Each case sends one bad write (a create, a PUT, a merge, JSON or strategic patch, a
server-side apply) and asserts kube's status code and the field it names, then that the
stored object is exactly what it was (same body, same resourceVersion) and that a refused
create stored nothing. A hypothesis property sends arbitrary JSON values in metadata
fields through create, merge patch and apply: never a 5xx, every refusal a Status.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api_server import BASE, Api, Reply, serving, workflowrun
from tests.support.etcd import etcd_endpoint_fixture

# The server of the API server tests (tests/support/api_server.py): in-process, over TLS, on
# an etcd of this module's own, a keyspace per test.
etcd_endpoint = etcd_endpoint_fixture()


@pytest.fixture
async def api(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with serving(etcd_endpoint, tmp_path) as client:
        yield client


MERGE = {"Content-Type": "application/merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
VICTIM = "victim"


def with_meta(name: str, **meta: Any) -> dict[str, Any]:
    body = workflowrun(name)
    body["metadata"].update(meta)
    return body


def owner(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-1", **fields}


async def snapshot(api: Api) -> dict[str, Any]:
    reply = await api.call("GET", f"{BASE}/{VICTIM}")
    assert reply.status == 200, reply.text
    body: dict[str, Any] = reply.json
    return body


def assert_status(reply: Reply, code: int) -> dict[str, Any]:
    assert reply.status == code, reply.text
    body: dict[str, Any] = reply.json
    assert body["kind"] == "Status" and body["code"] == code, body
    return body


def cause_fields(status: dict[str, Any]) -> list[str]:
    return [c.get("field", "") for c in status.get("details", {}).get("causes", [])]


# --- creates refused: (body, status, field or message fragment) ----------------------------------

CREATES: list[tuple[str, dict[str, Any], int, str]] = [
    ("label-key", with_meta("c1", labels={"a b": "x"}), 422, "metadata.labels"),
    ("label-value", with_meta("c2", labels={"a": "x y"}), 422, "metadata.labels"),
    (
        "annotations-over-256kib",
        with_meta("c3", annotations={"a": "x" * (256 * 1024)}),
        422,
        "metadata.annotations",
    ),
    ("finalizer", with_meta("c4", finalizers=["not a name"]), 422, "metadata.finalizers"),
    (
        "owner-without-uid",
        with_meta("c5", ownerReferences=[owner(uid="")]),
        422,
        "metadata.ownerReferences.uid",
    ),
    (
        "two-controllers",
        with_meta(
            "c6",
            ownerReferences=[owner(controller=True), owner(name="d", controller=True)],
        ),
        422,
        "metadata.ownerReferences",
    ),
    ("name", with_meta("Bad_Name"), 422, "metadata.name"),
    (
        "owner-reference-string",
        with_meta("c7", ownerReferences=["x"]),
        400,
        "into Go struct field ObjectMeta.metadata.ownerReferences of type v1.OwnerReference",
    ),
    (
        "owner-reference-uid-number",
        with_meta("c8", ownerReferences=[owner(uid=5)]),
        400,
        "into Go struct field OwnerReference.metadata.ownerReferences.uid of type types.UID",
    ),
    (
        "label-value-number",
        with_meta("c9", labels={"a": 5}),
        400,
        "into Go struct field ObjectMeta.metadata.labels of type string",
    ),
    ("replicas-boolean", workflowrun("c10", replicas=True), 422, "spec.replicas"),
    ("replicas-string", workflowrun("c11", replicas="3"), 422, "spec.replicas"),
]


@pytest.mark.parametrize(
    ("body", "code", "expected"),
    [case[1:] for case in CREATES],
    ids=[case[0] for case in CREATES],
)
async def test_a_bad_create_is_refused_naming_the_field_and_stores_nothing(
    api: Api, body: dict[str, Any], code: int, expected: str
) -> None:
    assert (await api.call("POST", BASE, body=workflowrun(VICTIM))).status == 201
    before = await snapshot(api)
    status = assert_status(await api.call("POST", BASE, body=body), code)
    if code == 422:
        assert expected in cause_fields(status), status
        assert f"{expected}: " in status["message"]
    else:
        assert expected in status["message"]
        assert status["reason"] == "BadRequest"
    name = body["metadata"]["name"]
    assert (await api.call("GET", f"{BASE}/{name}")).status == 404
    assert await snapshot(api) == before
    listed = await api.call("GET", BASE)
    assert [item["metadata"]["name"] for item in listed.json["items"]] == [VICTIM]


# --- writes to a stored object refused: (method, headers, body-from-stored, status, field) ------


def put_with(meta: dict[str, Any]) -> Any:
    def build(stored: dict[str, Any]) -> dict[str, Any]:
        body = json.loads(json.dumps(stored))
        body["metadata"].update(meta)
        return body

    return build


def constant(body: Any) -> Any:
    return lambda stored: body


UPDATES: list[tuple[str, str, dict[str, str], Any, int, str]] = [
    ("put-uid", "PUT", {}, put_with({"uid": "other"}), 422, "metadata.uid"),
    ("merge-uid", "PATCH", MERGE, constant({"metadata": {"uid": "other"}}), 422, "metadata.uid"),
    (
        "json-patch-uid",
        "PATCH",
        JSON_PATCH,
        constant([{"op": "replace", "path": "/metadata/uid", "value": "other"}]),
        422,
        "metadata.uid",
    ),
    (
        "strategic-uid",
        "PATCH",
        STRATEGIC,
        constant({"metadata": {"uid": "other"}}),
        422,
        "metadata.uid",
    ),
    (
        "apply-uid",
        "PATCH",
        APPLY,
        constant(
            {
                "apiVersion": "plnt.work/v1",
                "kind": "WorkflowRun",
                "metadata": {"name": VICTIM, "uid": "other"},
            }
        ),
        422,
        "metadata.uid",
    ),
    (
        "merge-deletion-timestamp",
        "PATCH",
        MERGE,
        constant({"metadata": {"deletionTimestamp": "2001-01-01T00:00:00Z"}}),
        422,
        "metadata.deletionTimestamp",
    ),
    (
        "merge-owner-reference-string",
        "PATCH",
        MERGE,
        constant({"metadata": {"ownerReferences": ["x"]}}),
        422,
        "patch",
    ),
    (
        "merge-label-number",
        "PATCH",
        MERGE,
        constant({"metadata": {"labels": {"a": 5}}}),
        422,
        "patch",
    ),
    (
        "merge-finalizer",
        "PATCH",
        MERGE,
        constant({"metadata": {"finalizers": ["a b"]}}),
        422,
        "metadata.finalizers",
    ),
    (
        "merge-replicas-boolean",
        "PATCH",
        MERGE,
        constant({"spec": {"replicas": True}}),
        422,
        "spec.replicas",
    ),
    ("put-label-number", "PUT", {}, put_with({"labels": {"a": 5}}), 400, ""),
    (
        "merge-annotations-over-256kib",
        "PATCH",
        MERGE,
        constant({"metadata": {"annotations": {"big": "x" * (256 * 1024)}}}),
        422,
        "metadata.annotations",
    ),
]


@pytest.mark.parametrize(
    ("method", "headers", "build", "code", "field"),
    [case[1:] for case in UPDATES],
    ids=[case[0] for case in UPDATES],
)
async def test_a_bad_write_to_a_stored_object_is_refused_and_changes_nothing(
    api: Api, method: str, headers: dict[str, str], build: Any, code: int, field: str
) -> None:
    assert (await api.call("POST", BASE, body=workflowrun(VICTIM))).status == 201
    before = await snapshot(api)
    reply = await api.call(
        method,
        f"{BASE}/{VICTIM}",
        body=build(before),
        headers=headers,
        params={"fieldManager": "tester"} if headers is APPLY else None,
    )
    status = assert_status(reply, code)
    if field:
        assert field in cause_fields(status), status
    after = await snapshot(api)
    assert after == before
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_a_patch_of_creation_timestamp_is_ignored_as_kube_ignores_it(api: Api) -> None:
    assert (await api.call("POST", BASE, body=workflowrun(VICTIM))).status == 201
    before = await snapshot(api)
    reply = await api.call(
        "PATCH",
        f"{BASE}/{VICTIM}",
        body={"metadata": {"creationTimestamp": "2001-01-01T00:00:00Z"}},
        headers=MERGE,
    )
    assert reply.status == 200, reply.text
    assert reply.json["metadata"]["creationTimestamp"] == before["metadata"]["creationTimestamp"]
    assert await snapshot(api) == before


# --- arbitrary JSON in metadata: never a 5xx ---------------------------------------------

METADATA_FIELDS = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "selfLink",
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
NESTED = st.one_of(
    st.builds(lambda v: {"labels": {"k": v}}, JSON_VALUES),
    st.builds(lambda v: {"annotations": {"k": v}}, JSON_VALUES),
    st.builds(lambda v: {"finalizers": [v]}, JSON_VALUES),
    st.builds(
        lambda key, v: {"ownerReferences": [{**owner(), key: v}]},
        st.sampled_from(["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"]),
        JSON_VALUES,
    ),
    st.builds(
        lambda key, v: {"managedFields": [{"manager": "m", "operation": "Update", key: v}]},
        st.sampled_from(["manager", "operation", "time", "fieldsType", "fieldsV1", "subresource"]),
        JSON_VALUES,
    ),
)
METADATA = st.one_of(
    st.builds(lambda field, v: {field: v}, st.sampled_from(METADATA_FIELDS), JSON_VALUES), NESTED
)


def assert_not_a_server_error(reply: Reply, what: str) -> None:
    assert reply.status < 500, f"{what}: {reply.status} {reply.text[:500]}"
    if reply.status >= 400:
        body = reply.json
        assert body["kind"] == "Status" and body["code"] == reply.status, (what, body)


async def test_arbitrary_json_in_metadata_fields_never_yields_a_5xx(api: Api) -> None:
    assert (await api.call("POST", BASE, body=workflowrun(VICTIM))).status == 201
    loop = asyncio.get_running_loop()
    counter = itertools.count()
    statuses: set[int] = set()

    def send(method: str, path: str, body: Any, headers: dict[str, str] | None = None) -> Reply:
        params = {"fieldManager": "prop"} if headers is APPLY else None
        call = api.call(method, path, body=body, headers=headers, params=params)
        return asyncio.run_coroutine_threadsafe(call, loop).result(timeout=60)

    @settings(
        max_examples=120,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(METADATA)
    def check(meta: dict[str, Any]) -> None:
        name = f"p{next(counter)}"
        created = send("POST", BASE, {**workflowrun(name), "metadata": {"name": name, **meta}})
        assert_not_a_server_error(created, f"create {meta!r}")
        patched = send("PATCH", f"{BASE}/{VICTIM}", {"metadata": meta}, MERGE)
        assert_not_a_server_error(patched, f"merge patch {meta!r}")
        config = {"apiVersion": "plnt.work/v1", "kind": "WorkflowRun", "metadata": meta}
        applied = send("PATCH", f"{BASE}/{VICTIM}", config, APPLY)
        assert_not_a_server_error(applied, f"apply {meta!r}")
        statuses.update({created.status, patched.status, applied.status})

    await asyncio.to_thread(check)
    # The property saw both admissions and each kind of refusal, so it could have failed.
    assert {400, 422} <= statuses and statuses & {200, 201}, statuses
