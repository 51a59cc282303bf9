"""Ending the workflows tests started on a shared Temporal server.

**Time-skipping test server** (`end_when_idle`).

The test server skips time only while nothing holds its time lock, and every workflow
task and activity task holds it from the moment it is scheduled until a worker finishes
it. A test's worker goes away when the test ends, so what its workflows still have to do
then holds the lock for good:

* a task scheduled while the worker shuts down is never polled (each test has its own
  task queue);
* a workflow left open (a saga controller waits for signals forever) schedules a task
  whenever one of its timers fires later, in another test's `env.sleep`;
* terminating a workflow drops its outstanding tasks without releasing their locks.

Any of them makes every later `env.sleep` of the module wait in real time until its
RPC times out. So each test's fixture, while its worker still runs, waits until its
workflow has no task outstanding (the worker finishes them) and only then terminates it.

**Dev server shared by a session's stacks** (`terminate_running`). Every deploy-test
module starts its own API server and worker on the session's Temporal and the same task
queue. A saga left running when its module ends (a failed deploy waiting out its retry
backoff, a rollout held mid-way) would be picked up by the next module's worker: its
status reports find no such run there and are dropped as "gone", and its steps go on,
starting runner processes nobody asked for while that module's tests run. So a stack
terminates every workflow still running when it stops.
"""

from __future__ import annotations

import asyncio

from temporalio import client as temporal_client
from temporalio.api.enums.v1 import EventType
from temporalio.service import RPCError, RPCStatusCode

IDLE_DEADLINE = 30.0
"""Seconds a workflow may take to finish its outstanding tasks once the test ended."""

_POLL = 0.05  # seconds between reads of the history while waiting for it to go idle

_TASK_ENDS = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
    }
)
_ACTIVITY_ENDS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}
_CLOSED = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    }
)


def outstanding(history: temporal_client.WorkflowHistory) -> list[str]:
    """What the workflow's history has scheduled and not seen end: its workflow task and
    activities (timers hold no lock until they fire), or the run it continued as. Empty
    once the workflow closed."""
    task = False
    activities: dict[int, str] = {}
    for event in history.events:
        kind = event.event_type
        if kind in _CLOSED:
            return []
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return ["the run it continued as"]  # read again: the handle follows to it
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            task = True
        elif kind in _TASK_ENDS:
            task = False
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled = event.activity_task_scheduled_event_attributes
            activities[event.event_id] = scheduled.activity_type.name
        elif kind in _ACTIVITY_ENDS:
            ended = getattr(event, _ACTIVITY_ENDS[kind])
            activities.pop(ended.scheduled_event_id, None)
    return (["workflow task"] if task else []) + sorted(activities.values())


async def end_when_idle(
    client: temporal_client.Client, workflow_id: str, *, deadline: float = IDLE_DEADLINE
) -> None:
    """Wait (while the test's worker still runs) until the workflow `workflow_id` has no
    task outstanding, then terminate it; one never started or already closed is left as
    it is. Fails when it is still busy after `deadline` seconds, naming what it waits for."""
    handle = client.get_workflow_handle(workflow_id)
    busy: list[str] = []
    try:
        async with asyncio.timeout(deadline):
            # Polled: nothing tells when a workflow has gone idle (a wait on new events
            # would block once it has).
            while busy := outstanding(await handle.fetch_history()):  # noqa: ASYNC110
                await asyncio.sleep(_POLL)
    except TimeoutError:
        raise AssertionError(f"workflow {workflow_id} still runs {busy} after the test") from None
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return  # never started
        raise
    try:
        await handle.terminate(reason="the test ended")
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:  # "workflow execution already completed"
            raise


async def terminate_running(address: str, *, reason: str = "the test stack stopped") -> int:
    """Terminate every workflow still running on the Temporal server at `address` (its
    default namespace); how many were. One that ends meanwhile is no error."""
    client = await temporal_client.Client.connect(address)
    ended = 0
    async for execution in client.list_workflows("ExecutionStatus = 'Running'"):
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        try:
            await handle.terminate(reason=reason)
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
        else:
            ended += 1
    return ended
