"""WorkflowRun transition Events over HTTP: every write path records them alike.

The recorder writes Events off the request path, so tests wait (with a deadline) until
the Events they expect are listed; an absence is proven by a later Event that arrives
first in the recorder's queue order.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.api_server import BASE, DIGEST, Api, serving, workflowrun
from tests.support.recording_deploy import RecordingDeploy
from tests.support.waiting import eventually

MERGE = {"Content-Type": "application/merge-patch+json"}
EVENTS = "/api/v1/namespaces/default/events"

Seen = list[tuple[str, str, str]]


async def events_of(api: Api, name: str) -> Seen:
    """(type, reason, message) of the Events about WorkflowRun `name`, oldest first."""
    reply = await api.call(
        "GET",
        EVENTS,
        params={"fieldSelector": f"involvedObject.kind=WorkflowRun,involvedObject.name={name}"},
    )
    assert reply.status == 200, reply.text
    return [(e["type"], e["reason"], e["message"]) for e in reply.json["items"]]


async def wait_for_events(api: Api, name: str, count: int) -> Seen:
    async def enough() -> Seen | None:
        seen = await events_of(api, name)
        return seen if len(seen) >= count else None

    found: Seen = await eventually(enough, within=20.0, what=f"{count} events about {name}")
    return found


async def test_scale_that_changes_replicas_records_the_same_event_as_a_patch_of_spec_replicas(
    api: Api,
) -> None:
    for name in ("patched", "scaled", "put-scaled"):
        assert (await api.call("POST", BASE, body=workflowrun(name))).status == 201
    patch = {"spec": {"replicas": 3}}
    assert (await api.call("PATCH", f"{BASE}/patched", body=patch, headers=MERGE)).status == 200
    scaled = await api.call("PATCH", f"{BASE}/scaled/scale", body=patch, headers=MERGE)
    assert scaled.status == 200, scaled.text
    current = (await api.call("GET", f"{BASE}/put-scaled/scale")).json
    current["spec"]["replicas"] = 3
    assert (await api.call("PUT", f"{BASE}/put-scaled/scale", body=current)).status == 200

    expected = [
        ("Normal", "Accepted", f"generation 1 accepted: oci://r.example/wf:1@{DIGEST}"),
        ("Normal", "SpecChanged", "generation 2 accepted"),
    ]
    assert await wait_for_events(api, "patched", 2) == expected
    assert await wait_for_events(api, "scaled", 2) == expected
    assert await wait_for_events(api, "put-scaled", 2) == expected


async def test_scale_to_the_same_replicas_records_no_event(api: Api) -> None:
    assert (await api.call("POST", BASE, body=workflowrun("same"))).status == 201
    same = {"spec": {"replicas": 1}}
    assert (await api.call("PATCH", f"{BASE}/same/scale", body=same, headers=MERGE)).status == 200
    more = {"spec": {"replicas": 2}}
    assert (await api.call("PATCH", f"{BASE}/same/scale", body=more, headers=MERGE)).status == 200
    seen = await wait_for_events(api, "same", 2)
    assert [reason for _, reason, _ in seen] == ["Accepted", "SpecChanged"]


async def test_delete_records_a_deleted_event(api: Api) -> None:
    assert (await api.call("POST", BASE, body=workflowrun("gone"))).status == 201
    dry = await api.call("DELETE", f"{BASE}/gone", params={"dryRun": "All"})
    assert dry.status == 200
    assert (await api.call("DELETE", f"{BASE}/gone")).status == 200
    assert await wait_for_events(api, "gone", 2) == [
        ("Normal", "Accepted", f"generation 1 accepted: oci://r.example/wf:1@{DIGEST}"),
        ("Normal", "Deleted", "generation 1 deleted"),
    ]


async def test_delete_of_a_run_held_by_teardown_records_the_request_then_the_removal(
    etcd_endpoint: str, tmp_path: Path
) -> None:
    async with serving(etcd_endpoint, tmp_path, deploy=RecordingDeploy()) as api:
        assert (await api.call("POST", BASE, body=workflowrun("held"))).status == 201
        assert (await api.call("DELETE", f"{BASE}/held")).status == 200
        seen = await wait_for_events(api, "held", 2)
        assert seen[1] == (
            "Normal",
            "DeletionRequested",
            "deletion requested; waiting for plnt.work/teardown",
        )
        released = {"metadata": {"finalizers": None}}
        reply = await api.call("PATCH", f"{BASE}/held", body=released, headers=MERGE)
        assert reply.status == 200, reply.text
        seen = await wait_for_events(api, "held", 3)
        assert seen[2] == ("Normal", "Deleted", "generation 1 deleted")


async def test_rollback_records_the_request_then_the_spec_change(api: Api) -> None:
    first = {"ref": "oci://r.example/wf:1", "digest": DIGEST}
    second = {"ref": "oci://r.example/wf:2", "digest": "sha256:" + "ef" * 32}
    body = workflowrun("rb")
    body["spec"]["workflow"] = second
    assert (await api.call("POST", BASE, body=body)).status == 201
    history = [{"revision": 1, **first}, {"revision": 2, **second}]
    status = {"status": {"revision": 2, "history": history}}
    assert (await api.call("PATCH", f"{BASE}/rb/status", body=status, headers=MERGE)).status == 200
    assert (await api.call("POST", f"{BASE}/rb/rollback")).status == 200
    seen = await wait_for_events(api, "rb", 3)
    assert seen[1:] == [
        ("Normal", "RollbackRequested", "rollback to revision 1 requested"),
        ("Normal", "SpecChanged", "generation 2 accepted"),
    ]
