"""The invocation workflow's timers and ends, on Temporal's time-skipping test server.

The workflow under test is the real `InvocationWorkflow`; its activities are scripted
under the workflow's activity names. Time is the test server's: the TTL of a finished
Invocation (an hour) and `spec.timeoutSeconds` are measured on its clock, so nothing
here waits for them on the wall clock.

Every scenario's history is replayed through the workflow code when it ends, and the
histories kept in `histories/` (recorded from these scenarios with
`PLNT_RECORD_INVOCATION_HISTORIES=1`, after an intentional change of the workflow) replay
too, so a change of the command sequence that would break Invocations in flight fails
here.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio import client as temporal_client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from plnt.sagas.invoking import workflow as inv
from tests.support.temporal import end_when_idle

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"
DEADLINE = 30.0
HISTORIES = Path(__file__).parent / "histories"
RECORD = os.environ.get("PLNT_RECORD_INVOCATION_HISTORIES") == "1"


class Scripted:
    """The invocation's activities: what each was asked, when, and what it answers."""

    def __init__(self) -> None:
        self.reports: list[tuple[datetime, inv.StatusReport]] = []
        self.expired: list[datetime] = []
        self.calls: list[datetime] = []
        self.not_ready = 0
        self.call_fails_with: str | None = None
        self.hold_calls = False
        self.holding = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.exists = True
        self.call_records_end = False

    def all(self) -> list[Callable[..., Any]]:
        return [self.call, self.report, self.expire]

    @activity.defn(name=inv.CALL_ACTIVITY)
    async def call(self, call: inv.CallRequest) -> inv.Called:
        if self.not_ready:  # the pin, which the call's first attempts make, fails
            self.not_ready -= 1
            raise inv.fail(inv.Reason.NOT_READY, "workflowrun r has no promoted revision yet")
        self.calls.append(activity.info().current_attempt_scheduled_time)
        if self.call_fails_with is not None:
            raise inv.fail(self.call_fails_with, "the step failed", step="answer")
        if self.hold_calls:
            self.holding.set()
            try:
                while True:  # heartbeats carry the cancellation
                    activity.heartbeat()
                    await asyncio.sleep(0.1)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        called = inv.Called(
            output={"answer": 42},
            trace=[{"id": "answer", "kind": "model"}],
            attempts=1,
            endpoint="http://127.0.0.1:1",
            revision=3,
            usage={"promptTokens": 3, "completionTokens": 4, "totalTokens": 7},
        )
        if self.call_records_end:  # as the real call does when its status write succeeds
            called.completion_time = inv.stamp(activity.info().current_attempt_scheduled_time)
        return called

    @activity.defn(name=inv.REPORT_ACTIVITY)
    async def report(self, report: inv.StatusReport) -> bool:
        self.reports.append((activity.info().current_attempt_scheduled_time, report))
        return self.exists

    @activity.defn(name=inv.EXPIRE_ACTIVITY)
    async def expire(self, ref: inv.InvocationRef) -> None:
        self.expired.append(activity.info().current_attempt_scheduled_time)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER)
    ) as environment:
        yield environment


class Running:
    """One invocation workflow on its own task queue with scripted activities."""

    def __init__(self, client: temporal_client.Client, scripted: Scripted) -> None:
        self.client = client
        self.scripted = scripted
        self.task_queue = f"invocation-{uuid.uuid4().hex[:8]}"
        self.started: list[str] = []  # workflow ids, terminated when the test ends

    async def replayed(self, handle: temporal_client.WorkflowHandle[Any, Any], name: str) -> None:
        """Replay the ended workflow's history through today's code (and keep it, when
        recording)."""
        history = await handle.fetch_history()
        await Replayer(workflows=[inv.InvocationWorkflow]).replay_workflow(history)
        if RECORD:
            HISTORIES.mkdir(exist_ok=True)
            (HISTORIES / f"invocation-{name}.json").write_text(history.to_json())

    async def start(self, **spec: Any) -> temporal_client.WorkflowHandle[Any, Any]:
        ref = inv.InvocationRef("default", "i", uuid.uuid4().hex[:8])
        request = inv.InvocationRequest(ref, "r", "run-uid", {"q": "?"}, **spec)
        workflow_id = inv.workflow_id(ref.namespace, ref.name, ref.uid)
        self.started.append(workflow_id)
        return await self.client.start_workflow(
            inv.InvocationWorkflow.run, request, id=workflow_id, task_queue=self.task_queue
        )


@pytest_asyncio.fixture(loop_scope="module")
async def running(env: WorkflowEnvironment) -> AsyncIterator[Running]:
    scripted = Scripted()
    built = Running(env.client, scripted)
    async with Worker(
        env.client,
        task_queue=built.task_queue,
        workflows=[inv.InvocationWorkflow],
        activities=scripted.all(),
        max_heartbeat_throttle_interval=timedelta(seconds=0.2),  # cancellations arrive fast
    ):
        try:
            yield built
        finally:
            for workflow_id in built.started:
                await end_when_idle(built.client, workflow_id)


async def test_a_finished_invocation_is_deleted_when_its_ttl_runs_out(running: Running) -> None:
    handle = await running.start(ttl_seconds_after_finished=3600)
    outcome = await asyncio.wait_for(handle.result(), DEADLINE)
    assert outcome.phase == "Succeeded"
    ((finished_at, report),) = running.scripted.reports
    assert report.finished and report.fields["phase"] == "Succeeded"
    assert report.fields["output"] == {"answer": 42} and report.fields["revision"] == 3
    assert report.fields["usage"]["totalTokens"] == 7
    assert [c["type"] for c in report.fields["conditions"]] == ["Complete"]
    (expired_at,) = running.scripted.expired
    assert 3600 <= (expired_at - finished_at).total_seconds() < 3660
    await running.replayed(handle, "succeeded-ttl")


async def test_a_success_the_call_recorded_is_not_reported_again_and_expires_after_its_ttl(
    running: Running,
) -> None:
    running.scripted.call_records_end = True
    handle = await running.start(ttl_seconds_after_finished=3600)
    outcome = await asyncio.wait_for(handle.result(), DEADLINE)
    assert running.scripted.reports == []
    (called_at,) = running.scripted.calls
    assert outcome.phase == "Succeeded"
    assert outcome.fields["completionTime"] == inv.stamp(called_at)
    assert outcome.fields["output"] == {"answer": 42} and outcome.fields["revision"] == 3
    (expired_at,) = running.scripted.expired
    assert 3600 <= (expired_at - called_at).total_seconds() < 3660
    await running.replayed(handle, "succeeded-recorded-by-the-call")


async def test_a_ttl_of_zero_deletes_at_once_and_a_vanished_invocation_is_not_expired(
    running: Running,
) -> None:
    handle = await running.start(ttl_seconds_after_finished=0)
    await asyncio.wait_for(handle.result(), DEADLINE)
    assert len(running.scripted.expired) == 1
    running.scripted.exists = False  # deleted before its end was recorded: nothing to expire
    handle = await running.start(ttl_seconds_after_finished=0)
    await asyncio.wait_for(handle.result(), DEADLINE)
    assert len(running.scripted.expired) == 1


async def test_a_call_lost_until_the_timeout_fails_with_reason_timeout(running: Running) -> None:
    running.scripted.call_fails_with = inv.Reason.RUNNER_LOST  # retried with backoff
    handle = await running.start(timeout_seconds=30)
    outcome = await asyncio.wait_for(handle.result(), DEADLINE)
    assert (outcome.phase, outcome.reason) == ("Failed", "Timeout")
    fields = running.scripted.reports[-1][1].fields
    assert fields["error"] == {
        "reason": "Timeout",
        "message": "did not finish within 30 s (the step failed)",
    }
    assert {c["type"] for c in fields["conditions"]} == {"Failed", "Stalled"}
    calls = running.scripted.calls
    assert len(calls) >= 3 and (calls[-1] - calls[0]).total_seconds() < 30
    await running.replayed(handle, "timeout")


async def test_a_step_failure_fails_at_once_naming_the_reason_and_the_step(
    running: Running,
) -> None:
    running.scripted.call_fails_with = "BadGateway"
    handle = await running.start()
    outcome = await asyncio.wait_for(handle.result(), DEADLINE)
    assert (outcome.phase, outcome.reason) == ("Failed", "BadGateway")
    assert len(running.scripted.calls) == 1
    error = running.scripted.reports[-1][1].fields["error"]
    assert error == {"reason": "BadGateway", "message": "the step failed", "step": "answer"}
    await running.replayed(handle, "step-failed")


async def test_a_run_not_ready_yet_is_waited_for(running: Running) -> None:
    running.scripted.not_ready = 3
    handle = await running.start()
    outcome = await asyncio.wait_for(handle.result(), DEADLINE)
    assert outcome.phase == "Succeeded"
    await running.replayed(handle, "waited-for-a-revision")


async def test_a_run_never_ready_fails_with_reason_timeout_naming_what_it_waited_for(
    running: Running,
) -> None:
    running.scripted.not_ready = 1_000  # the call is retried with backoff until the timeout
    handle = await running.start(timeout_seconds=30)
    outcome = await asyncio.wait_for(handle.result(), DEADLINE)
    assert (outcome.phase, outcome.reason) == ("Failed", "Timeout")
    assert running.scripted.calls == []
    (report,) = [r for _, r in running.scripted.reports]
    assert report.fields["error"] == {
        "reason": "Timeout",
        "message": "did not finish within 30 s (workflowrun r has no promoted revision yet)",
    }
    assert "revision" not in report.fields
    assert 1_000 - running.scripted.not_ready >= 3
    await running.replayed(handle, "never-ready")


async def test_cancelling_the_workflow_stops_the_call_before_the_end_is_recorded(
    running: Running,
) -> None:
    running.scripted.hold_calls = True
    running.scripted.exists = False  # the Invocation was deleted: that is why it is cancelled
    handle = await running.start()
    await asyncio.wait_for(running.scripted.holding.wait(), DEADLINE)
    await handle.cancel()
    outcome = await asyncio.wait_for(handle.result(), DEADLINE)
    assert running.scripted.cancelled.is_set()
    assert (outcome.phase, outcome.reason) == ("Cancelled", "Cancelled")
    assert running.scripted.reports[-1][1].fields["phase"] == "Cancelled"
    assert running.scripted.expired == []
    await running.replayed(handle, "cancelled")


KEPT = sorted(HISTORIES.glob("invocation-*.json"))


async def test_every_scenario_has_a_kept_history() -> None:
    assert [path.stem for path in KEPT] == [
        "invocation-cancelled",
        "invocation-never-ready",
        "invocation-step-failed",
        "invocation-succeeded-recorded-by-the-call",
        "invocation-succeeded-ttl",
        "invocation-timeout",
        "invocation-waited-for-a-revision",
    ]


@pytest.mark.parametrize("path", KEPT, ids=[path.stem for path in KEPT])
async def test_a_kept_history_replays_without_nondeterminism(path: Path) -> None:
    text = await asyncio.to_thread(path.read_text)
    history = temporal_client.WorkflowHistory.from_json(path.stem, text)
    assert history.events
    await Replayer(workflows=[inv.InvocationWorkflow]).replay_workflow(history)
