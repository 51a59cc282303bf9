"""The invocation workflow: one durable call of a WorkflowRun's workflow per Invocation.

The API server starts `InvocationWorkflow` right after an Invocation's create (through
`starter.TemporalDeployControl.start_invocation`; id `invocation/NS/NAME/UID`, so a
recreated Invocation is a new call and starting one twice changes nothing). The workflow:

1. **calls a runner** (`invocation-call`, one activity, retried): its attempt first
   **pins a revision** from one read of the run — `stable` is the run's promoted
   revision, `canary` the other revision taking traffic, a number that revision while it
   serves. A run with no promoted revision (or no ready replica) yet fails the attempt
   with `NotReady`, retried with backoff; a revision that does not exist or no longer
   serves fails the Invocation at once. The pinned revision is kept in the activity's
   heartbeat details, so every later attempt calls the same one. Then a ready replica's
   `/invoke?stream=true`, asking each finished step's output (`stepOutputs`). The
   outputs are heartbeat details too, so when the replica dies mid-call the activity
   goes on with another ready replica of the same revision, and when the worker dies the
   next attempt (on another worker, after `HEARTBEAT_TIMEOUT`) does, handing the
   finished steps back (`completedSteps`): they are not run again. Status says `Running`,
   the replica and the number of the call (`attempts`) before each call is sent, so every
   call a runner received is counted whenever a worker dies (`invoking`, "Attempts"), and
   a success is recorded by the activity itself as soon as the runner answered;
2. **records the end** otherwise (`invocation-report`, a local activity: it runs inside
   the workflow task that handles the call's end, with no round trip of its own):
   Succeeded with the output, tokens, trace and attempts (when the call could not record
   it), or Failed with a reason (`Reason` below), in status, with kstatus's conditions
   (`Complete` or `Failed`; `Stalled` on failure) and `observedGeneration`; retried until
   the API server answers;
3. **keeps the finished Invocation** for `spec.ttlSecondsAfterFinished` (a durable timer),
   then deletes it (`invocation-expire`).

`spec.timeoutSeconds` bounds the call, its waits and retries included (its
schedule-to-close timeout); running out fails the Invocation with reason `Timeout`.

On the critical path of a call that succeeds at once there are two workflow tasks (the
start, which schedules the call and receives it eagerly, and the end's) and one activity;
the status a watcher waits for is written before the second task. (Until this shape, the
pin and the report were activities of their own, each a round trip through Temporal; the
kind was not released with that history, so no `workflow.patched` marks the change.)

Cancelling the workflow (the Invocation was deleted) cancels the call activity and waits
until it stopped: its connection to the runner is closed, so the runner cancels the
invocation and its backend call. The workflow then records `Cancelled` if the Invocation
still exists (a cancel from outside plnt, then kept for its TTL as any finished one), and
ends.

Workflow code: deterministic, no I/O, no clock but `workflow.now()`. The dataclasses here
are the history's format: add fields only with defaults.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    RetryState,
    TimeoutError,
    TimeoutType,
)
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from plnt.api.invocations import COMPLETE, FAILED, STALLED, WORKFLOW_ID_PREFIX

CALL_ACTIVITY = "invocation-call"
REPORT_ACTIVITY = "invocation-report"
EXPIRE_ACTIVITY = "invocation-expire"
ACTIVITIES = (CALL_ACTIVITY, REPORT_ACTIVITY, EXPIRE_ACTIVITY)

HEARTBEAT_TIMEOUT = timedelta(seconds=5)
"""How long a call may go without a heartbeat before its worker counts as lost (the call
heartbeats every second, and at once when a step finishes)."""
CALL_ATTEMPTS = 20
"""Tries of the call activity (each tries every ready replica); `timeoutSeconds` bounds
them too."""
LOCAL_RETRY_THRESHOLD = timedelta(milliseconds=500)
"""The report is a local activity (run inside the workflow task, no round trip of its
own); a retry of it due in more than this waits on a durable Temporal timer rather than
in the worker's memory, so a long wait (the API server down) is in the history."""


class Reason(enum.StrEnum):
    """Why an Invocation failed (`status.error.reason`): the `type` of the activities'
    errors, read back by the workflow."""

    TIMEOUT = "Timeout"
    """`spec.timeoutSeconds` ran out."""
    RUN_GONE = "WorkflowRunGone"
    """The run was deleted (or recreated) since the Invocation was created."""
    INVOCATION_GONE = "InvocationGone"
    REVISION_NOT_FOUND = "RevisionNotFound"
    REVISION_NOT_SERVING = "RevisionNotServing"
    NO_CANARY = "NoCanary"
    NOT_READY = "NotReady"
    """No promoted revision or no ready replica yet: retried until the timeout."""
    RUNNER_LOST = "RunnerLost"
    """Every ready replica failed mid-call or could not be reached: retried."""
    OUTPUT_TOO_LARGE = "OutputTooLarge"
    RUNNER_ERROR = "RunnerError"
    """The runner answered an error without a type of its own."""
    CANCELLED = "Cancelled"


RETRIED = frozenset({Reason.NOT_READY, Reason.RUNNER_LOST})


def workflow_id(namespace: str, name: str, uid: str) -> str:
    """The workflow of one Invocation: deterministic, and new for a recreated object."""
    return f"{WORKFLOW_ID_PREFIX}/{namespace}/{name}/{uid}"


def ref_of_workflow_id(workflow: str) -> InvocationRef | None:
    """The Invocation a `workflow_id` names; None for any other id (names and namespaces
    hold no `/`, so the id splits back into exactly its parts)."""
    parts = workflow.split("/")
    if len(parts) != 4 or parts[0] != WORKFLOW_ID_PREFIX or not all(parts[1:]):
        return None
    return InvocationRef(parts[1], parts[2], parts[3])


def fail(reason: str, message: str, *, step: str | None = None) -> ApplicationError:
    """An activity error the workflow reads back as `status.error` (retried when the
    reason is in `RETRIED`)."""
    return ApplicationError(
        message,
        {"step": step} if step else {},
        type=reason,
        non_retryable=reason not in RETRIED,
    )


@dataclass(frozen=True)
class InvocationRef:
    """One Invocation by identity: a recreated object with the same name is another call."""

    namespace: str
    name: str
    uid: str


@dataclass
class InvocationRequest:
    """The workflow's input: the Invocation, its run (as admitted) and its spec."""

    invocation: InvocationRef
    run: str
    run_uid: str
    inputs: dict[str, Any]
    revision: str = "stable"
    timeout_seconds: int = 600
    ttl_seconds_after_finished: int = 3600


@dataclass
class Pinned:
    """The revision a call goes to, as the run listed it when it was pinned."""

    revision: int
    digest: str = ""
    endpoints: list[str] = field(default_factory=list)


@dataclass
class CallRequest:
    """What `invocation-call` needs: which Invocation, of which run, with what."""

    request: InvocationRequest


@dataclass
class Called:
    """The runner's answer, as status keeps it, and the revision that gave it.

    `attempts`: the calls sent to runners, every replica and every attempt of the activity
    together (`invoking`, "Attempts"). `completion_time`: set when the call activity
    recorded the success in status itself (then the workflow does not report it again).
    """

    output: Any
    trace: list[dict[str, Any]]
    attempts: int
    endpoint: str
    revision: int
    usage: dict[str, Any] | None = None
    completion_time: str = ""


@dataclass
class StatusReport:
    """Status fields to set (None removes one) on the Invocation, if it is still that one.

    `finished`: the report that ends the call also sets `observedGeneration`.
    """

    invocation: InvocationRef
    fields: dict[str, Any]
    finished: bool = False


@dataclass
class InvocationOutcome:
    """The workflow's result: how the call ended."""

    phase: str
    reason: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "observedGeneration": 1,
        "lastTransitionTime": at,
        "reason": reason,
        "message": message,
    }


def succeeded(called: Called, at: str) -> dict[str, Any]:
    """The status of a call that succeeded."""
    message = f"succeeded on revision {called.revision}"
    if called.attempts > 1:
        message += f" after {called.attempts} attempts"
    return {
        "phase": "Succeeded",
        "revision": called.revision,
        "completionTime": at,
        "output": called.output,
        "usage": called.usage,
        "trace": called.trace,
        "attempts": called.attempts,
        "endpoint": called.endpoint,
        "error": None,
        "message": message,
        "conditions": [condition(COMPLETE, "Succeeded", message, at)],
    }


def failed(phase: str, reason: str, message: str, at: str, step: str | None) -> dict[str, Any]:
    """The status of a call that failed (or was cancelled)."""
    error: dict[str, Any] = {"reason": reason, "message": message}
    if step:
        error["step"] = step
    return {
        "phase": phase,
        "completionTime": at,
        "error": error,
        "message": message,
        "conditions": [
            condition(FAILED, reason, message, at),
            condition(STALLED, reason, message, at),
        ],
    }


def _error_of(error: ActivityError, timeout_seconds: int) -> tuple[str, str, str | None]:
    """(reason, message, step) of a failed activity: a retried failure whose next retry
    would outlive the timeout is the timeout, naming the last failure."""
    cause = error.cause
    if error.retry_state == RetryState.TIMEOUT and not isinstance(cause, TimeoutError):
        last = cause.message if isinstance(cause, ApplicationError) else str(cause or error)
        return Reason.TIMEOUT, f"did not finish within {timeout_seconds} s ({last})", None
    if isinstance(cause, TimeoutError):
        if cause.type in (TimeoutType.SCHEDULE_TO_CLOSE, TimeoutType.START_TO_CLOSE):
            return Reason.TIMEOUT, f"did not finish within {timeout_seconds} s", None
        return Reason.RUNNER_LOST, f"the call was lost ({cause.message})", None
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else {}
        step = details.get("step") if isinstance(details, dict) else None
        return cause.type or Reason.RUNNER_ERROR, cause.message, step
    return Reason.RUNNER_ERROR, str(cause or error), None


WORKFLOW_TYPE = "Invocation"
"""The workflow's registered name: what Temporal's visibility lists it by."""


@workflow.defn(name=WORKFLOW_TYPE, sandboxed=False)
class InvocationWorkflow:
    """Pin, call, record, expire (see the module docstring).

    Not sandboxed: every Invocation is a new workflow, and building Temporal's sandbox
    for one (re-importing this module, its dataclasses and enums, behind restricted
    proxies) adds about 8 ms and as much CPU to each call's critical path (measured in
    docs/sagas.md, "Determinism, guarded by structure"). What the sandbox would check at
    run time is checked otherwise: this module imports only Temporal and `plnt.api`
    (import-linter's contract names this package), reads no clock but
    `workflow.now()`, the replay tests run every scenario's history through it, and
    `tests/sagas/test_workflow_modules.py` replays the kept histories inside the sandbox.
    """

    @workflow.run
    async def run(self, request: InvocationRequest) -> InvocationOutcome:
        timeout = timedelta(seconds=request.timeout_seconds)
        phase, reason, recorded = "Succeeded", "", False
        try:
            called = await workflow.execute_activity(
                CALL_ACTIVITY,
                CallRequest(request),
                result_type=Called,
                schedule_to_close_timeout=timeout,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=_retries(),
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            recorded = bool(called.completion_time)  # the call wrote its success itself
            fields = succeeded(called, called.completion_time or stamp(workflow.now()))
        except ActivityError as error:
            if not isinstance(error.cause, CancelledError):
                reason, message, step = _error_of(error, request.timeout_seconds)
                phase = "Failed"
                fields = failed(phase, reason, message, stamp(workflow.now()), step)
            else:  # the call stopped because the workflow was cancelled
                phase, reason, fields = _cancelled()
        except asyncio.CancelledError:
            phase, reason, fields = _cancelled()
        if recorded or await self._report(StatusReport(request.invocation, fields, finished=True)):
            await workflow.sleep(timedelta(seconds=request.ttl_seconds_after_finished))
            await workflow.execute_activity(
                EXPIRE_ACTIVITY,
                request.invocation,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=200),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=0,
                ),
            )
        return InvocationOutcome(phase, reason, fields)

    async def _report(self, report: StatusReport) -> bool:
        """Record the end (`invocation-report`, a local activity), retried until the API
        server answers; False when the Invocation is gone."""
        kept: bool = await workflow.execute_local_activity(
            REPORT_ACTIVITY,
            report,
            result_type=bool,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200),
                maximum_interval=timedelta(seconds=10),
                maximum_attempts=0,  # until the API server answers: the end must be recorded
            ),
            local_retry_threshold=LOCAL_RETRY_THRESHOLD,
        )
        return kept


def _cancelled() -> tuple[str, str, dict[str, Any]]:
    message = "the invocation was cancelled (its Invocation was deleted)"
    return (
        "Cancelled",
        Reason.CANCELLED,
        failed("Cancelled", Reason.CANCELLED, message, stamp(workflow.now()), None),
    )


def _retries() -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=CALL_ATTEMPTS,
        non_retryable_error_types=[r.value for r in Reason if r not in RETRIED],
    )
