"""core/v1 Events as plnt writes them: one shape for the API server and the saga."""

from __future__ import annotations

from plnt.api import events

INVOLVED = {
    "apiVersion": "plnt.work/v1",
    "kind": "WorkflowRun",
    "metadata": {"name": "summarize", "namespace": "team-a", "uid": "u-1", "resourceVersion": "9"},
}


def test_an_event_about_an_object_references_it_and_validates_as_a_core_event() -> None:
    body = events.event_about(
        INVOLVED, type="Normal", reason="Accepted", message="ok", component="plnt-apiserver"
    )
    assert body["involvedObject"] == {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "name": "summarize",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "9",
    }
    assert body["metadata"]["namespace"] == "team-a"
    assert body["metadata"]["name"].startswith("summarize.")
    assert body["firstTimestamp"] == body["lastTimestamp"]
    assert events.Event.model_validate(body).to_wire() == body


def test_an_events_message_is_cut_to_what_kubernetes_allows() -> None:
    body = events.event_about(
        INVOLVED, type="Warning", reason="Failed", message="x" * 5000, component="c"
    )
    assert len(body["message"]) == events.MAX_MESSAGE


def test_an_object_without_a_namespace_gets_its_events_in_default() -> None:
    body = events.event_about(
        {"kind": "Thing", "metadata": {"name": "t"}},
        type="Normal",
        reason="R",
        message="m",
        component="c",
    )
    assert body["metadata"]["namespace"] == "default"


def test_event_names_sort_in_creation_order() -> None:
    names = [events.event_name("run") for _ in range(50)]
    suffixes = [int(name.split(".", 1)[1], 16) for name in names]
    assert suffixes == sorted(suffixes)
    assert names == sorted(names)
    assert all(name.startswith("run.") for name in names)
