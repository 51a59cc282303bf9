"""Events written through plnt's core/v1 API are held to kube-apiserver's Event rules and
read back at kube's time precisions, with no generation (as `eventStrategy` keeps them)."""

from __future__ import annotations

from typing import Any

import pytest

from plnt.registry import eventrules
from tests.support.api_server import Api

EVENTS = "/api/v1/namespaces/default/events"


def legacy(name: str, **fields: Any) -> dict[str, Any]:
    """An Event as client-go's legacy recorder and kubectl write one (no eventTime)."""
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "WorkflowRun", "name": "w", "namespace": "default"},
        "reason": "Tested",
        "message": "a test event",
        "type": "Normal",
        "source": {"component": "tester"},
        "firstTimestamp": "2026-12-01T10:00:00.123456Z",
        "lastTimestamp": "2026-12-01T11:00:00+01:00",
        "count": 1,
    }
    event.update(fields)
    return event


def series_shaped(name: str, **fields: Any) -> dict[str, Any]:
    """An Event in the events.k8s.io shape, written through core/v1 (with eventTime)."""
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "WorkflowRun", "name": "w", "namespace": "default"},
        "reason": "Tested",
        "type": "Normal",
        "eventTime": "2026-12-01T10:00:00.1234567Z",
        "reportingComponent": "plnt.work/tester",
        "reportingInstance": "tester-1",
        "action": "Testing",
        "series": {"count": 2, "lastObservedTime": "2026-12-01T10:00:05Z"},
    }
    event.update(fields)
    return event


async def test_times_are_stored_at_kubes_precisions_and_events_have_no_generation(
    api: Api,
) -> None:
    created = await api.call("POST", EVENTS, body=legacy("precise"))
    assert created.status == 201, created.text
    assert created.json["firstTimestamp"] == "2026-12-01T10:00:00Z"
    assert created.json["lastTimestamp"] == "2026-12-01T10:00:00Z"  # +01:00 read as UTC
    assert "generation" not in created.json["metadata"]

    shaped = await api.call("POST", EVENTS, body=series_shaped("micro"))
    assert shaped.status == 201, shaped.text
    assert shaped.json["eventTime"] == "2026-12-01T10:00:00.123456Z"
    assert shaped.json["series"]["lastObservedTime"] == "2026-12-01T10:00:05.000000Z"

    read = await api.call("GET", f"{EVENTS}/precise")
    assert read.json["firstTimestamp"] == "2026-12-01T10:00:00Z"
    updated = await api.call(
        "PUT", f"{EVENTS}/precise", body={**read.json, "count": 2, "message": "again"}
    )
    assert updated.status == 200, updated.text
    assert "generation" not in updated.json["metadata"]


async def test_an_event_with_event_time_but_no_reporter_or_action_is_422_naming_each_field(
    api: Api,
) -> None:
    body = series_shaped("bare")
    for field in ("reportingComponent", "reportingInstance", "action"):
        del body[field]
    reply = await api.call("POST", EVENTS, body=body)
    assert reply.status == 422, reply.text
    causes = {(c["field"], c["reason"]) for c in reply.json["details"]["causes"]}
    assert causes == {
        ("reportingComponent", "FieldValueRequired"),
        ("reportingInstance", "FieldValueRequired"),
        ("action", "FieldValueRequired"),
    }
    missing = await api.call("GET", f"{EVENTS}/bare")
    assert missing.status == 404  # nothing was stored


async def test_an_event_outside_its_objects_namespace_is_422(api: Api) -> None:
    body = legacy("elsewhere")
    body["involvedObject"]["namespace"] = "other"
    reply = await api.call("POST", EVENTS, body=body)
    assert reply.status == 422, reply.text
    (cause,) = reply.json["details"]["causes"]
    assert cause["field"] == "involvedObject.namespace"
    assert "does not match event.namespace" in cause["message"]


@pytest.mark.parametrize(
    ("event", "fields"),
    [
        (legacy("ok"), set()),
        (series_shaped("ok"), set()),
        # A cluster-scoped object's legacy Event lives in "" or "default".
        (legacy("ok", involvedObject={"kind": "Namespace", "name": "n"}), set()),
        (
            series_shaped("ok", involvedObject={"kind": "Namespace", "name": "n"}),
            set(),
        ),
        (series_shaped("ok", reportingComponent="not a name!"), {"reportingComponent"}),
        (series_shaped("ok", reportingInstance="i" * 129), {"reportingInstance"}),
        (series_shaped("ok", action="a" * 129), {"action"}),
        (series_shaped("ok", reason=""), {"reason"}),
        (series_shaped("ok", message="m" * 1025), {"message"}),
        (legacy("ok", message="m" * 1025), set()),  # legacy Events: kube does not check it
    ],
)
def test_kubes_legacy_event_rules(event: dict[str, Any], fields: set[str]) -> None:
    assert {cause.field for cause in eventrules.causes(event)} == fields


def test_a_cluster_scoped_objects_event_with_event_time_must_be_in_a_system_namespace() -> None:
    event = series_shaped("x", involvedObject={"kind": "Namespace", "name": "n"})
    event["metadata"]["namespace"] = "team-a"
    assert [c.field for c in eventrules.causes(event)] == ["involvedObject.namespace"]
