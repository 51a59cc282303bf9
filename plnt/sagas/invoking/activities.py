"""The invocation workflow's activities: call a runner (pinning a revision), record, expire.

Every side effect of an Invocation, each idempotent, through plnt's HTTP API
(`plnt.client`) and the runners' own `/invoke`; never storage or the registry, so a worker
can run anywhere that reaches the API server, the runners and Temporal.

`call` is the one that lasts. Its attempt first pins the revision (one read of the run:
`pinning`), unless an earlier attempt did (the heartbeat details say which). It asks a
ready replica of that revision for its stream with each finished step's output
(`stepOutputs`) and what steps finish inside (`forEach` elements, tool-loop turns and
calls), keeps them as its heartbeat details (handed to the SDK every `BEAT_SECONDS`, which
sends at most one a second, and recorded in Temporal at once when they change:
`checkpointing`), writes `Running` in status before each call is sent, records a success in
status itself as soon as the runner answered (the workflow's `report` records it when
that write failed), and:

* when the replica dies mid-call (the connection breaks, or the stream ends without a
  last line), calls the next ready replica of the same revision at once, handing it the
  finished steps (`completedSteps`), which it does not run again;
* when this worker dies, Temporal notices the missing heartbeat and runs the next
  attempt on another worker, which starts from the last recorded progress the same way
  (the steps, elements, turns and calls that finished before it died are not run again;
  a step skipped stays skipped);
* when it is cancelled (the Invocation was deleted), its connection to the runner closes,
  so the runner cancels the invocation and the backend call;
* when an attempt after the first finds the success already recorded (the worker that
  recorded it was lost before Temporal heard of it), it returns that, calling no one.

**Attempts** (`status.attempts`) count the calls sent to runners, every replica and
every attempt of the activity together. A call is counted by the `Running` write that
names its replica, which is awaited before the call is sent: once a runner can have
received a call, the count that includes it is durable, whenever the worker dies after.
So an attempt after the first counts on from `status.attempts` (read with the object it
reads anyway), not from the heartbeat's `tries`: a worker killed right after a call
takes with it the heartbeat its SDK had not sent yet, so that copy can lag behind (and
it can be ahead of a take-back, below). Each write sets the count rather than adding to
it, so a write repeated counts no call twice: the `Running` write is tried until the API
server answers (one whose answer was lost may have landed), and only then is the call
sent. What is not a call is not counted: an attempt that fails before calling (no
promoted revision or no ready replica yet: `NotReady`), a replica that does not answer
`/readyz`, a call whose connection was refused (it never left: the count is written back
one less). The one over-count left: a worker lost between the `Running` write and the
send.

A runner's refusal (invalid inputs) or a failed step is the Invocation's failure, not
retried: the runner already retried the step as its spec says. Which revision and which
replicas: `pinning`; the stream and the progress carried across attempts: `resuming`;
the status writes: `recording`.

Errors: `invocation.fail(reason, …)` (`ApplicationError` typed by `invocation.Reason`),
retried by Temporal only for `NotReady` and `RunnerLost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
from temporalio import activity
from temporalio.exceptions import ApplicationError

from plnt.api import checkpoints
from plnt.api.envelopes import invoke_envelope
from plnt.api.headers import TIMEOUT_HEADER
from plnt.api.invocations import MAX_OUTPUT_BYTES, PLURAL, RECONCILING
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.processes import tasks
from plnt.sagas import values as v
from plnt.sagas.invoking import checkpointing, pinning, recording, resuming
from plnt.sagas.invoking import workflow as inv
from plnt.sagas.metrics import SagaMetrics

log = logging.getLogger("plnt.sagas.invocations")

BEAT_SECONDS = 1.0
NDJSON = "application/x-ndjson"
READY_TIMEOUT = aiohttp.ClientTimeout(total=2.0)
CALL_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5.0)
"""A call lasts as long as its workflow does (the schedule-to-close timeout bounds it)."""
COUNT_RETRY_SECONDS = (0.2, 5.0)
"""First and longest wait between tries of the `Running` write that counts a call (it
doubles), tried again until the API server answers: a write that landed but whose answer
was lost is written again with the same count, and the call is sent only then."""


class InvocationActivities:
    """The invocation workflow's activities, bound to the worker's API client."""

    def __init__(self, *, api: PlntClient, metrics: SagaMetrics | None = None) -> None:
        self.api = api
        self.metrics = metrics
        """Where each call's immediate recordings are counted (None: nowhere)."""
        self._session: aiohttp.ClientSession | None = None

    def all(self) -> list[Any]:
        """Every activity, for `Worker(activities=...)`."""
        return [self.call, self.report, self.expire]

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=CALL_TIMEOUT)
        return self._session

    async def close(self) -> None:
        """Close the runners' session (the API client belongs to the deploy activities)."""
        if self._session is not None:
            await self._session.close()

    # -- reading -----------------------------------------------------------------------

    async def _run(self, request: inv.InvocationRequest) -> dict[str, Any]:
        """The run the Invocation was admitted for; `WorkflowRunGone` when it is not there."""
        namespace = request.invocation.namespace
        try:
            run = await self.api.get_workflowrun(request.run, namespace=namespace)
        except client_errors.NotFound:
            run = None
        meta = (run or {}).get("metadata") or {}
        if run is None or meta.get("uid") != request.run_uid or meta.get("deletionTimestamp"):
            raise inv.fail(
                inv.Reason.RUN_GONE,
                f"workflowrun {request.run} was deleted after the Invocation was created",
            )
        return run

    # -- call --------------------------------------------------------------------------

    @activity.defn(name=inv.CALL_ACTIVITY)
    async def call(self, call: inv.CallRequest) -> inv.Called:
        """Pin the revision (on the attempt that first gets that far), then call ready
        replicas of it until one answers (module docstring)."""
        info = activity.info()
        progress = resuming.Progress.of(
            info.heartbeat_details[0] if info.heartbeat_details else None
        )
        if info.attempt > 1 and (ended := await self._resumed(call, progress)) is not None:
            return ended
        if progress.revision is None:
            pinned = await self._pin(call.request)
            progress.pinned(pinned.revision, pinned.digest, inv.stamp(datetime.now(UTC)))
            ready = pinned.endpoints
        else:
            ready = await self._endpoints(call.request, progress.revision)
        revision = progress.revision
        order = [e for e in ready if e not in progress.lost] + [
            e for e in ready if e in progress.lost
        ]
        problems: list[str] = []
        if info.attempt > 1:
            problems.append(
                f"attempt {info.attempt} after the previous one was lost;"
                f" {len(progress.completed)} finished steps handed back"
            )
        marks = checkpointing.Checkpoints(progress.details)
        try:
            return await self._call_replicas(call, order, revision, progress, problems, marks)
        finally:
            if self.metrics is not None:
                self.metrics.observe_checkpoints(marks.recorded, marks.seconds)

    async def _call_replicas(
        self,
        call: inv.CallRequest,
        order: list[str],
        revision: int | None,
        progress: resuming.Progress,
        problems: list[str],
        marks: checkpointing.Checkpoints,
    ) -> inv.Called:
        """Call the ready replicas in `order` until one finishes the call."""
        async with self._beating(progress), marks.running():
            for endpoint in order:
                if not await self._ready(endpoint):
                    problems.append(f"{endpoint} is not ready")
                    continue
                await self._running(call, endpoint, progress, problems)
                try:
                    answer = await self._stream(endpoint, call.request, progress, marks)
                except resuming.Lost as lost:
                    if not lost.sent:
                        await self._uncount(call, progress)
                    if endpoint not in progress.lost:
                        progress.lost.append(endpoint)
                    problems.append(f"{endpoint}: {lost}")
                    progress.beat()
                    continue
                return await self._finish(call, self._called(answer, endpoint, progress))
        raise inv.fail(
            inv.Reason.RUNNER_LOST,
            f"no ready replica of revision {revision} finished the call ({'; '.join(problems)})",
        )

    async def _resumed(
        self, call: inv.CallRequest, progress: resuming.Progress
    ) -> inv.Called | None:
        """What the earlier attempts left in status: the success one recorded before its
        worker was lost (its completion never reached Temporal), returned so that it is
        neither called nor written again; otherwise None, `progress` counting on from the
        calls status counts (module docstring, "Attempts"). `InvocationGone` when the
        Invocation is."""
        obj = await recording.read(self.api, call.request.invocation)
        if obj is None:
            raise inv.fail(inv.Reason.INVOCATION_GONE, "the Invocation was deleted")
        status = obj.get("status") or {}
        if status.get("phase") != "Succeeded" or not status.get("completionTime"):
            # The record: every count reached it before its call was sent (a consistent
            # read), where the heartbeat's copy may be stale.
            progress.tries = int(status.get("attempts") or 0)
            return None
        return inv.Called(
            output=status.get("output"),
            trace=[t for t in status.get("trace") or [] if isinstance(t, dict)],
            attempts=int(status.get("attempts") or 1),
            endpoint=str(status.get("endpoint") or ""),
            revision=int(status.get("revision") or 0),
            usage=status.get("usage"),
            completion_time=str(status["completionTime"]),
        )

    async def _finish(self, call: inv.CallRequest, called: inv.Called) -> inv.Called:
        """Record the success in status at once, as the workflow's report would (one try:
        the workflow's report records it when this could not, so a failure here is no
        failure of the call); `completion_time` says it was recorded."""
        at = inv.stamp(datetime.now(UTC))
        fields = inv.succeeded(called, at)
        try:
            recorded = await recording.write(
                self.api, call.request.invocation, fields, finished=True
            )
        except (client_errors.ClientError, ApplicationError) as error:
            log.info("the end of %s is left to its workflow: %s", call.request.invocation, error)
            recorded = False
        if recorded:
            called.completion_time = at
        return called

    async def _pin(self, request: inv.InvocationRequest) -> inv.Pinned:
        """The revision the spec selects, from one read of the run; a `NotReady` failure
        (retried) says in status what it waits for."""
        run = await self._run(request)
        try:
            return pinning.pin(run, request.revision)
        except ApplicationError as error:
            if error.type != inv.Reason.NOT_READY:
                raise
            waiting = {"message": f"waiting: {error.message}"}
            if not await recording.write(self.api, request.invocation, waiting):
                raise inv.fail(inv.Reason.INVOCATION_GONE, "the Invocation was deleted") from None
            raise

    async def _endpoints(self, request: inv.InvocationRequest, revision: int) -> list[str]:
        """The ready replicas of the revision an earlier attempt pinned, read again."""
        run = await self._run(request)
        if pinning.traffic_entry(run, revision) is None:
            raise inv.fail(
                inv.Reason.REVISION_NOT_SERVING,
                f"revision {revision} of workflowrun {request.run} no longer serves",
            )
        return pinning.endpoints_of(run, revision)

    async def _ready(self, endpoint: str) -> bool:
        try:
            async with self._http().get(f"{endpoint}/readyz", timeout=READY_TIMEOUT) as answer:
                return answer.status == 200
        except (aiohttp.ClientError, OSError, TimeoutError):
            return False

    async def _running(
        self, call: inv.CallRequest, endpoint: str, progress: resuming.Progress, problems: list[str]
    ) -> None:
        """Count the call about to be sent and say in status which replica it goes to (and
        why again when it is a retry); awaited before the call is sent, so the count is
        durable before a runner can receive the call. The count is set, not added to: the
        write, tried until the API server answers (`COUNT_RETRY_SECONDS`), sets the same
        number each time. `InvocationGone` when the Invocation is."""
        attempts = progress.tries + 1
        message = f"calling revision {progress.revision} at {endpoint}"
        if problems:
            message += f" ({'; '.join(problems)})"
        fields: dict[str, Any] = {
            "phase": "Running",
            "revision": progress.revision,
            "digest": progress.digest or None,
            "startTime": progress.start_time,
            "endpoint": endpoint,
            "attempts": attempts,
            "message": message,
            "conditions": [
                {
                    "type": RECONCILING,
                    "status": "True",
                    "lastTransitionTime": progress.start_time,
                    "reason": "Running",
                    "message": message,
                }
            ],
        }
        wait, longest = COUNT_RETRY_SECONDS
        while True:
            try:
                written = await recording.write(self.api, call.request.invocation, fields)
            except (client_errors.TransportError, client_errors.ServerError) as error:
                log.info("counting call %d of %s: %s", attempts, call.request.invocation, error)
                await asyncio.sleep(wait)  # heartbeats go on meanwhile, cancels come through
                wait = min(wait * 2, longest)
                continue
            if not written:
                raise inv.fail(inv.Reason.INVOCATION_GONE, "the Invocation was deleted")
            progress.tries = attempts
            return

    async def _uncount(self, call: inv.CallRequest, progress: resuming.Progress) -> None:
        """Take back the call just counted, which never left (its replica refused the
        connection): status says one call less again. One try: when it fails, the count
        stays one over until this attempt's next call sets it."""
        progress.tries -= 1
        try:
            await recording.write(
                self.api, call.request.invocation, {"attempts": progress.tries or None}
            )
        except (client_errors.ClientError, ApplicationError) as error:
            log.info("the attempts of %s stay one over: %s", call.request.invocation, error)

    async def _stream(
        self,
        endpoint: str,
        request: inv.InvocationRequest,
        progress: resuming.Progress,
        marks: checkpointing.Checkpoints,
    ) -> dict[str, Any]:
        """The `result` line of one streamed call; `resuming.Lost` when the replica goes
        away (`sent` False when it could not even be connected to)."""
        body = invoke_envelope(
            request.inputs,
            completed_steps=progress.completed,
            skipped_steps=progress.skipped,
            step_progress=progress.partial,
            step_outputs=True,
        )
        try:
            async with self._http().post(
                f"{endpoint}/invoke",
                params={"stream": "true"},
                json=body,
                headers={"Accept": NDJSON, **_time_left()},
            ) as response:
                try:
                    return await self._read(response, progress, marks)
                except BaseException:
                    response.close()  # never reused: the runner sees its caller leave
                    raise
        except aiohttp.ClientConnectorError as error:  # no connection: no runner received it
            raise resuming.Lost(str(error) or type(error).__name__, sent=False) from error
        except (aiohttp.ClientError, OSError) as error:
            raise resuming.Lost(str(error) or type(error).__name__) from error

    async def _read(
        self,
        response: aiohttp.ClientResponse,
        progress: resuming.Progress,
        marks: checkpointing.Checkpoints,
    ) -> dict[str, Any]:
        if response.status != 200 or NDJSON not in response.headers.get("Content-Type", ""):
            raw = await response.read()
            try:
                refused = json.loads(raw)
            except ValueError:
                refused = {}
            error = refused.get("error") if isinstance(refused, dict) else None
            if response.status >= 500 and not _answered_by_runner(error):
                raise resuming.Lost(f"answered {response.status}")
            raise resuming.runner_failure(error, response.status)
        async for line in resuming.ndjson(response):
            kind = line.get("type")
            if kind == "step":
                step = line.get("step") or {}
                finished = isinstance(step, dict) and "error" not in step and "output" in line
                skipped = step.get("skipped") if isinstance(step, dict) else None
                why = str(skipped) if skipped is not None else None
                if finished and progress.add(str(step.get("id")), line["output"], skipped=why):
                    marks.mark()
            elif kind == checkpoints.PROGRESS:
                if progress.note(line):
                    marks.mark()
            elif kind == "result":
                return line
            elif kind == "error":
                raise resuming.runner_failure(line.get("error"), line.get("status"))
        raise resuming.Lost("the stream ended without a result")

    def _called(
        self, answer: dict[str, Any], endpoint: str, progress: resuming.Progress
    ) -> inv.Called:
        output = answer.get("output")
        size = len(json.dumps(output, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_OUTPUT_BYTES:
            raise inv.fail(
                inv.Reason.OUTPUT_TOO_LARGE,
                f"the output is {size} bytes, more than the {MAX_OUTPUT_BYTES} bytes"
                f" ({MAX_OUTPUT_BYTES // 1024} KiB) an Invocation keeps in status;"
                " call …/invoke or …/proxy/invoke for larger answers",
            )
        trace = [t for t in answer.get("trace") or [] if isinstance(t, dict)]
        return inv.Called(
            output=output,
            trace=trace,
            attempts=progress.tries,
            endpoint=endpoint,
            revision=progress.revision or 0,
            usage=resuming.usage(answer),
        )

    @contextlib.asynccontextmanager
    async def _beating(self, progress: resuming.Progress) -> AsyncIterator[None]:
        """Heartbeat the progress every `BEAT_SECONDS` while the block runs: the liveness
        Temporal judges the worker by, and the way a cancellation reaches the call."""

        async def loop() -> None:
            while True:
                progress.beat()
                await asyncio.sleep(BEAT_SECONDS)

        async with tasks.running(loop(), name="invocation heartbeat"):
            yield

    # -- report and expire -------------------------------------------------------------

    @activity.defn(name=inv.REPORT_ACTIVITY)
    async def report(self, report: inv.StatusReport) -> bool:
        """Write the fields into the Invocation's status; False when it is gone."""
        return await recording.write(
            self.api, report.invocation, report.fields, finished=report.finished
        )

    @activity.defn(name=inv.EXPIRE_ACTIVITY)
    async def expire(self, ref: inv.InvocationRef) -> None:
        """Delete the finished Invocation (its TTL ran out); nothing when it is gone."""
        options = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"uid": ref.uid},
        }
        with contextlib.suppress(client_errors.NotFound, client_errors.Conflict):
            await self.api.request("DELETE", recording.path(self.api, ref), json=options)


async def delete_invocations_of(api: PlntClient, run: v.RunRef) -> int:
    """Delete the Invocations the run owns (its teardown); how many were deleted.

    Listed by `spec.workflowRun`, deleted only when their controller owner is this very run
    (uid), each with a uid precondition; one deleted meanwhile is no error. Deleting a
    running Invocation cancels its call (the API server's hooks cancel its workflow).
    """
    path = api.collection_path(PLURAL, namespace=run.namespace)
    try:
        items = await api.list_all(path, params={"fieldSelector": f"spec.workflowRun={run.name}"})
    except client_errors.Forbidden as error:
        log.warning("the invocations of %s/%s cannot be listed: %s", run.namespace, run.name, error)
        return 0
    deleted = 0
    began = time.monotonic()
    for item in items:
        meta = item.get("metadata") or {}
        owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
        if not any(o.get("uid") == run.uid and o.get("controller") for o in owners):
            continue
        options = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "preconditions": {"uid": meta["uid"]},
        }
        item_path = api.object_path(PLURAL, str(meta["name"]), namespace=run.namespace)
        with contextlib.suppress(client_errors.NotFound, client_errors.Conflict):
            await api.request("DELETE", item_path, json=options)
            deleted += 1
    if deleted:
        log.info(
            "deleted %d invocations of %s/%s in %.1f s",
            deleted,
            run.namespace,
            run.name,
            time.monotonic() - began,
        )
    return deleted


_REFUSED_UNSENT = frozenset({"overloaded"})
"""Runner errors for calls no backend received (a backend's queue had no room): another
replica, or a later attempt, may take them without sending a backend call twice."""


def _answered_by_runner(error: Any) -> bool:
    """Whether a 5xx answer is the runner's own verdict on the call (its error body, with a
    type), which is final: the runner's step attempts are the one layer that retries a
    backend call (docs/reliability.md), so calling again would send the backend the same
    failed call once more. A refusal for lack of room is not final, nor is a 5xx without
    the runner's body (something between answered)."""
    if not isinstance(error, dict) or not isinstance(error.get("type"), str):
        return False
    return error["type"] not in _REFUSED_UNSENT


def _time_left() -> dict[str, str]:
    """The call's time left (`X-Plnt-Timeout-Ms`): what remains of the activity's
    schedule-to-close timeout (the Invocation's `timeoutSeconds`) on this attempt."""
    info = activity.info()
    budget = info.schedule_to_close_timeout
    if not budget:
        return {}
    used = datetime.now(UTC) - info.current_attempt_scheduled_time
    left = max((budget - used).total_seconds(), 0.0)
    return {TIMEOUT_HEADER: f"{left * 1000.0:.0f}"}
