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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def about(message: str, **changes: object) -> dict[str, object]:
    event = events.event_about(
        INVOLVED, type="Warning", reason="Flaky", message=message, component="plnt"
    )
    event.update(changes)
    return event


def test_a_repeat_within_the_window_counts_into_the_event_written_first() -> None:
    clock = Clock()
    correlator = events.EventCorrelator(window=600.0, clock=clock)
    first = about("same")
    assert correlator.repeat_of(first) is None
    correlator.remember(first, namespace="team-a", name="first", count=1)
    clock.now = 599.0
    repeat = correlator.repeat_of(about("same"))  # another name and time, the same Event
    assert repeat == events.Repeat("team-a", "first", 2)
    assert set(repeat.patch()) == {"count", "lastTimestamp"} and repeat.patch()["count"] == 2
    correlator.remember(first, namespace="team-a", name="first", count=2)
    clock.now = 599.0 + 600.0
    assert correlator.repeat_of(first) is None  # the window runs from the last write


def test_another_message_type_reason_source_or_object_is_another_event() -> None:
    correlator = events.EventCorrelator()
    correlator.remember(about("same"), namespace="team-a", name="first", count=1)
    assert correlator.repeat_of(about("other")) is None
    assert correlator.repeat_of(about("same", type="Normal")) is None
    assert correlator.repeat_of(about("same", reason="Steady")) is None
    assert correlator.repeat_of(about("same", source={"component": "plnt-prober"})) is None
    moved = about("same")
    moved["involvedObject"] = {**moved["involvedObject"], "uid": "u-2"}  # type: ignore[dict-item]
    assert correlator.repeat_of(moved) is None


def test_forgotten_and_least_recent_events_are_new_again() -> None:
    correlator = events.EventCorrelator(remembered=2)
    for message in ("a", "b", "c"):
        correlator.remember(about(message), namespace="team-a", name=message, count=1)
    assert correlator.repeat_of(about("a")) is None  # evicted: only two are remembered
    assert correlator.repeat_of(about("c")) == events.Repeat("team-a", "c", 2)
    correlator.forget(about("c"))
    assert correlator.repeat_of(about("c")) is None
