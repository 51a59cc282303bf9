"""EventPoster against a real plnt API server: Events written through the API, a repeat
counted into the Event written first (kube's count and lastTimestamp), another message
an Event of its own, and an Event deleted meanwhile written anew."""

from __future__ import annotations

import uuid
from typing import Any

from plnt.api.events import event_about
from plnt.client import PlntClient
from plnt.client.events import EventPoster


def about(client: PlntClient, name: str, uid: str, message: str) -> dict[str, Any]:
    involved = {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": name, "namespace": client.namespace, "uid": uid},
    }
    return event_about(
        involved, type="Warning", reason="BackendUnreachable", message=message, component="t"
    )


async def test_repeats_are_counted_into_one_event_and_other_messages_are_new_events(
    client: PlntClient,
) -> None:
    name, uid = f"b-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    poster = EventPoster(client)
    for _ in range(3):
        await poster.write(about(client, name, uid, "refused"))
    await poster.write(about(client, name, uid, "HTTP 503"))

    stored = await client.events_for(name, kind="PlntBackend")
    counted = sorted((e["message"], e["count"]) for e in stored)
    assert counted == [("HTTP 503", 1), ("refused", 3)]
    refused = next(e for e in stored if e["message"] == "refused")
    assert refused["lastTimestamp"] >= refused["firstTimestamp"]
    assert refused["involvedObject"]["uid"] == uid


async def test_a_repeat_of_an_event_deleted_meanwhile_is_written_anew(client: PlntClient) -> None:
    name, uid = f"b-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    poster = EventPoster(client)
    await poster.write(about(client, name, uid, "refused"))
    [first] = await client.events_for(name, kind="PlntBackend")
    path = f"/api/v1/namespaces/{client.namespace}/events/{first['metadata']['name']}"
    await client.request("DELETE", path)

    await poster.write(about(client, name, uid, "refused"))
    [again] = await client.events_for(name, kind="PlntBackend")
    assert again["metadata"]["name"] != first["metadata"]["name"] and again["count"] == 1
    await poster.write(about(client, name, uid, "refused"))
    [counted] = await client.events_for(name, kind="PlntBackend")
    assert counted["metadata"]["name"] == again["metadata"]["name"] and counted["count"] == 2
