"""The invocation workflow's activities: call a runner (pinning a revision), record, expire.

Every side effect of an Invocation, each idempotent, through plnt's HTTP API
(`plnt.client`) and the runners' own `/invoke`; never storage or the registry, so a worker
can run anywhere that reaches the API server, the runners and Temporal.

`call` is the one that lasts. Its attempt first pins the revision (one read of the run:
`pinning`), unless an earlier attempt did (the heartbeat details say which). It asks a
ready replica of that revision for its stream with each finished step's output
(`stepOutputs`), keeps those outputs as its heartbeat details (sent at once when a step
finishes, and every `BEAT_SECONDS`), writes `Running` in status while the stream starts,
records a success in status itself as soon as the runner answered (the workflow's
`report` records it when that write failed), and:

* when the replica dies mid-call (the connection breaks, or the stream ends without a
  last line), calls the next ready replica of the same revision at once, handing it the
  finished steps (`completedSteps`), which it does not run again;
* when this worker dies, Temporal notices the missing heartbeat and runs the next
  attempt on another worker, which starts from the last heartbeat's details the same way;
* when it is cancelled (the Invocation was deleted), its connection to the runner closes,
  so the runner cancels the invocation and the backend call;
* when an attempt after the first finds the success already recorded (the worker that
  recorded it was lost before Temporal heard of it), it returns that, calling no one.

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

from plnt.api.invocations import MAX_OUTPUT_BYTES, PLURAL, RECONCILING
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.processes import tasks
from plnt.sagas import invocation as inv
from plnt.sagas import pinning, recording, resuming
from plnt.sagas import values as v

log = logging.getLogger("plnt.sagas.invocations")

BEAT_SECONDS = 1.0
NDJSON = "application/x-ndjson"
READY_TIMEOUT = aiohttp.ClientTimeout(total=2.0)
CALL_TIMEOUT = aiohttp.ClientTimeout(total=None, sock_connect=5.0)
"""A call lasts as long as its workflow does (the schedule-to-close timeout bounds it)."""


class InvocationActivities:
    """The invocation workflow's activities, bound to the worker's API client."""

    def __init__(self, *, api: PlntClient) -> None:
        self.api = api
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
        if info.attempt > 1 and (ended := await self._ended_before(call)) is not None:
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
        async with self._beating(progress):
            for endpoint in order:
                if not await self._ready(endpoint):
                    problems.append(f"{endpoint} is not ready")
                    continue
                progress.tries += 1
                try:
                    answer = await self._calling(call, endpoint, progress, problems)
                except resuming.Lost as lost:
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

    async def _ended_before(self, call: inv.CallRequest) -> inv.Called | None:
        """The success an earlier attempt recorded before its worker was lost (its
        completion never reached Temporal), so it is neither called nor written again;
        None when the call has not ended. `InvocationGone` when the Invocation is."""
        obj = await recording.read(self.api, call.request.invocation)
        if obj is None:
            raise inv.fail(inv.Reason.INVOCATION_GONE, "the Invocation was deleted")
        status = obj.get("status") or {}
        if status.get("phase") != "Succeeded" or not status.get("completionTime"):
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

    async def _calling(
        self, call: inv.CallRequest, endpoint: str, progress: resuming.Progress, problems: list[str]
    ) -> dict[str, Any]:
        """One streamed call, with the status saying so written meanwhile rather than
        before: the write does not delay the call. The answer is returned only once the
        write is done, so no later write lands before it; when the write finds the
        Invocation gone (or fails), the call is stopped and that is raised."""
        stream = asyncio.ensure_future(self._stream(endpoint, call.request, progress))
        try:
            await self._running(call, endpoint, progress, problems)
        except BaseException:
            stream.cancel()
            await asyncio.wait([stream])
            if not stream.cancelled():
                stream.exception()  # the write's failure is the one that counts
            raise
        return await stream

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
        """Say in status which replica is called now, and why again when it is a retry."""
        message = f"calling revision {progress.revision} at {endpoint}"
        if problems:
            message += f" ({'; '.join(problems)})"
        fields: dict[str, Any] = {
            "phase": "Running",
            "revision": progress.revision,
            "digest": progress.digest or None,
            "startTime": progress.start_time,
            "endpoint": endpoint,
            "attempts": progress.tries,
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
        if not await recording.write(self.api, call.request.invocation, fields):
            raise inv.fail(inv.Reason.INVOCATION_GONE, "the Invocation was deleted")

    async def _stream(
        self, endpoint: str, request: inv.InvocationRequest, progress: resuming.Progress
    ) -> dict[str, Any]:
        """The `result` line of one streamed call; `_Lost` when the replica goes away."""
        body: dict[str, Any] = {"inputs": request.inputs, "stepOutputs": True}
        if progress.completed:
            body["completedSteps"] = {k: {"output": o} for k, o in progress.completed.items()}
        try:
            async with self._http().post(
                f"{endpoint}/invoke",
                params={"stream": "true"},
                json=body,
                headers={"Accept": NDJSON},
            ) as response:
                try:
                    return await self._read(response, progress)
                except BaseException:
                    response.close()  # never reused: the runner sees its caller leave
                    raise
        except (aiohttp.ClientError, OSError) as error:
            raise resuming.Lost(str(error) or type(error).__name__) from error

    async def _read(
        self, response: aiohttp.ClientResponse, progress: resuming.Progress
    ) -> dict[str, Any]:
        if response.status != 200 or NDJSON not in response.headers.get("Content-Type", ""):
            raw = await response.read()
            if response.status >= 500:
                raise resuming.Lost(f"answered {response.status}")
            try:
                refused = json.loads(raw)
            except ValueError:
                refused = {}
            error = refused.get("error") if isinstance(refused, dict) else None
            raise resuming.runner_failure(error, response.status)
        async for line in resuming.ndjson(response):
            kind = line.get("type")
            if kind == "step":
                step = line.get("step") or {}
                finished = isinstance(step, dict) and "error" not in step and "output" in line
                if finished and progress.add(str(step.get("id")), line["output"]):
                    progress.beat()
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
