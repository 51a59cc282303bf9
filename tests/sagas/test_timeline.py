"""The saga's timeline and conditions as status shows them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from plnt.sagas.deploying.workflow import timeline

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_steps_record_state_attempts_and_times() -> None:
    line = timeline.Timeline.of(["pull", "install"])
    line.start("pull", T0, "pulling")
    line.finish("pull", T0 + timedelta(seconds=2), "Succeeded", "pulled")
    line.set_attempts("pull", 3)
    line.skip_pending(T0 + timedelta(seconds=3), "not run")
    assert line.to_json() == [
        {
            "name": "pull",
            "state": "Succeeded",
            "attempts": 3,
            "startTime": "2026-01-02T03:04:05Z",
            "endTime": "2026-01-02T03:04:07Z",
            "message": "pulled",
        },
        {
            "name": "install",
            "state": "Skipped",
            "attempts": 0,
            "startTime": "2026-01-02T03:04:08Z",
            "endTime": "2026-01-02T03:04:08Z",
            "message": "not run",
        },
    ]


def test_a_condition_keeps_its_transition_time_until_its_status_changes() -> None:
    conditions = timeline.Conditions()
    conditions.set("Ready", False, "Deploying", "a", now=T0, generation=1)
    conditions.set("Ready", False, "SmokeFailed", "b", now=T0 + timedelta(minutes=1), generation=2)
    ready = conditions.get("Ready")
    assert ready is not None
    assert ready["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    assert (ready["reason"], ready["message"], ready["observedGeneration"]) == (
        "SmokeFailed",
        "b",
        2,
    )
    conditions.set("Ready", True, "Promoted", "c", now=T0 + timedelta(minutes=2), generation=2)
    ready = conditions.get("Ready")
    assert ready is not None and ready["lastTransitionTime"] == "2026-01-02T03:06:05Z"


def test_conditions_are_listed_ready_progressing_degraded() -> None:
    conditions = timeline.Conditions()
    for kind in ("Degraded", "Ready", "Progressing"):
        conditions.set(kind, False, "R", "", now=T0, generation=1)
    assert [c["type"] for c in conditions.to_json()] == ["Ready", "Progressing", "Degraded"]


def test_observing_a_generation_updates_every_condition_and_nothing_else() -> None:
    conditions = timeline.Conditions()
    conditions.set("Ready", True, "Promoted", "m", now=T0, generation=1)
    conditions.set("Degraded", False, "Healthy", "h", now=T0, generation=1)
    conditions.observe(3)
    assert [(c["observedGeneration"], c["reason"]) for c in conditions.to_json()] == [
        (3, "Promoted"),
        (3, "Healthy"),
    ]
