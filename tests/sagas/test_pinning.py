"""Which revision an Invocation's call goes to (`plnt.sagas.invoking.pinning`): pure rules over a
run's status as the deploy saga writes it."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from plnt.sagas.invoking import pinning, resuming
from plnt.sagas.invoking import workflow as inv


def run(**status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r"}, "status": status}


SERVING = run(
    phase="Ready",
    revision=3,
    history=[{"revision": 1}, {"revision": 2}, {"revision": 3}],
    traffic=[
        {
            "revision": 3,
            "digest": "sha256:aa",
            "weight": 90,
            "endpoints": ["http://a/", "http://b"],
        },
        {"revision": 4, "digest": "sha256:bb", "weight": 10, "endpoints": ["http://c"]},
    ],
)


@pytest.mark.parametrize(
    ("selector", "revision", "digest"),
    [("stable", 3, "sha256:aa"), ("canary", 4, "sha256:bb"), ("4", 4, "sha256:bb")],
)
def test_a_selector_pins_the_revision_it_names_with_its_digest(
    selector: str, revision: int, digest: str
) -> None:
    endpoints = pinning.endpoints_of(SERVING, revision)
    assert pinning.pin(SERVING, selector) == inv.Pinned(revision, digest, endpoints)
    assert pinning.endpoints_of(SERVING, 3) == ["http://a", "http://b"]


DEPLOYING = run(phase="Deploying")
NO_REPLICA = run(revision=1, traffic=[{"revision": 1, "weight": 100}])
STABLE_ONLY = run(revision=1, traffic=[{"revision": 1, "weight": 100, "endpoints": ["http://a"]}])


@pytest.mark.parametrize(
    ("obj", "selector", "reason", "message"),
    [
        (SERVING, "2", "RevisionNotServing", "revision 2 of workflowrun r no longer serves"),
        (SERVING, "9", "RevisionNotFound", "has no revision 9 (revisions: 1, 2, 3, 4)"),
        (DEPLOYING, "stable", "NotReady", "has no promoted revision yet (phase Deploying)"),
        (NO_REPLICA, "stable", "NotReady", "revision 1 of workflowrun r has no ready replica"),
        (STABLE_ONLY, "canary", "NoCanary", "workflowrun r has no canary taking traffic"),
    ],
)
def test_a_selector_that_names_no_serving_revision_fails_saying_why(
    obj: dict[str, Any], selector: str, reason: str, message: str
) -> None:
    with pytest.raises(ApplicationError) as raised:
        pinning.pin(obj, selector)
    assert raised.value.type == reason and message in raised.value.message
    assert raised.value.non_retryable is (reason != "NotReady")


def test_progress_survives_its_round_trip_through_heartbeat_details() -> None:
    progress = resuming.Progress(completed={"a": {"x": 1}}, lost=["http://a"], tries=2)
    assert resuming.Progress.of(progress.details()) == progress
    progress.pinned(3, "sha256:aa", "2026-12-01T10:00:00Z")  # every attempt calls revision 3
    assert resuming.Progress.of(progress.details()) == progress
    assert resuming.Progress.of(None) == resuming.Progress()


def test_progress_carries_finished_outputs_only_up_to_its_bound() -> None:
    progress = resuming.Progress()
    assert progress.add("small", "x" * 100)
    assert not progress.add("huge", "x" * resuming.MAX_CARRIED_BYTES)
    assert list(progress.completed) == ["small"]


@pytest.mark.parametrize(
    ("answered", "source"),
    [
        ({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}, "reported"),
        ({"prompt_tokens": 3, "completion_tokens": 4, "source": "reported"}, "reported"),
        ({"prompt_tokens": 3, "completion_tokens": 4, "source": "counted"}, "counted"),
    ],
)
def test_an_invocations_usage_keeps_whether_the_tokens_were_reported_or_counted(
    answered: dict[str, Any], source: str
) -> None:
    assert resuming.usage({"usage": answered}) == {
        "promptTokens": 3,
        "completionTokens": 4,
        "totalTokens": 7,
        "source": source,
    }
    assert resuming.usage({"output": "no model call"}) is None
