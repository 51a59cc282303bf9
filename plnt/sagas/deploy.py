"""The deploy saga: one long-lived Temporal workflow per WorkflowRun.

Why one workflow per run and not one per deploy: "at most one deploy in flight, a
newer generation supersedes an older one" is then a property of a single piece of
sequential code instead of a race between workflows. The API server signal-with-starts
it (`desire`) on every accepted write; the workflow keeps only the newest desired
state, deploys it, and when a newer generation arrives mid-deploy it cancels the
in-flight saga, which compensates before the next one starts.

One deploy: pull → resolve → install (canary) → smoke → analyze (optional) →
promote. The undo of a step is registered before the step runs; any failure (or
cancellation) runs the registered undos in reverse, so a failed canary never stays
behind and the stable revision keeps serving. A change of `spec.replicas` alone
scales the stable revision without a new revision. Deletion tears every replica
down and then releases the `plnt.work/teardown` finalizer.

The workflow does no I/O: activities (by name, `plnt.sagas.activities`) do it, and
`report` (a local activity) writes status and Events through the API server. The
history grows with each deploy, so the workflow continues as new when Temporal
suggests it, carrying its whole state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import timeline as tl
    from plnt.sagas import values as v

HISTORY_LIMIT = 10
STEPS = ["pull", "resolve", "install", "smoke", "analyze", "promote"]
PHASES = {
    "pull": "Pulling",
    "resolve": "Resolving",
    "install": "Deploying",
    "smoke": "SmokeTesting",
    "analyze": "SmokeTesting",
    "promote": "Promoting",
}
# Failure type (ApplicationError.type) → the condition reason a human acts on.
REASONS = {
    "DigestMismatch": "DigestMismatch",
    "InvalidSpec": "InvalidSpec",
    "InvalidReference": "InvalidSpec",
    "SpecNotFound": "SpecNotFound",
    "BackendUnavailable": "BackendUnavailable",
    "NoBackend": "BackendUnavailable",
    "InstallFailed": "InstallFailed",
    "SmokeFailed": "SmokeFailed",
    "AnalysisFailed": "AnalysisFailed",
}
FAILURE_STEP_REASON = {
    "pull": "PullFailed",
    "resolve": "BackendUnavailable",
    "install": "InstallFailed",
    "smoke": "SmokeFailed",
    "analyze": "AnalysisFailed",
    "promote": "PromoteFailed",
}


def _retry(attempts: int, *, non_retryable: list[str] | None = None) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(milliseconds=250),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=attempts,
        non_retryable_error_types=non_retryable or [],
    )


SPEC_ERRORS = ["DigestMismatch", "InvalidSpec", "InvalidReference", "SpecNotFound"]


@dataclass
class ControllerState:
    """Everything the workflow knows; carried across continue-as-new."""

    run: v.RunRef
    stable: v.Deployment | None = None
    next_revision: int = 1
    handled_generation: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    saga: list[dict[str, Any]] = field(default_factory=list)
    phase: str = "Pending"
    pending: v.Desired | None = None


class _Interrupted(Exception):
    """The in-flight deploy was superseded or aborted (after its compensation ran)."""


def fingerprint(spec: dict[str, Any]) -> str:
    """What makes a new revision: everything in the spec except replicas and canary settings."""
    relevant = {k: spec.get(k) for k in ("workflow", "backend", "gpuClass", "target", "cache")}
    return json.dumps(relevant, sort_keys=True, separators=(",", ":"))


@workflow.defn(name="WorkflowRunController")
class WorkflowRunController:
    """The deploy saga of one WorkflowRun (see the module docstring)."""

    def __init__(self) -> None:
        self.state: ControllerState | None = None
        self.desired: v.Desired | None = None
        self.in_flight: v.Desired | None = None
        self.interrupt: str | None = None
        self.committing = False
        self.canary: tuple[int, str, list[str], int] | None = None
        self.timeline = tl.Timeline()
        self.conditions = tl.Conditions()

    # -- handlers -------------------------------------------------------------------

    @workflow.signal
    def desire(self, desired: v.Desired) -> None:
        """A write was accepted: remember the newest desired state (or the deletion)."""
        current = self.desired
        if current is None or desired.deleting or desired.generation >= current.generation:
            if current is not None and current.deleting:
                return  # deletion is final
            self.desired = desired

    @workflow.update
    def abort(self) -> bool:
        """Cancel the in-flight deploy (compensation runs); False when none is in flight."""
        if self.in_flight is None or self.committing:
            return False
        self.interrupt = "Aborted"
        return True

    @workflow.query
    def deploying(self) -> int | None:
        """The generation being deployed right now, if any."""
        return self.in_flight.generation if self.in_flight else None

    # -- main loop ------------------------------------------------------------------

    @workflow.run
    async def run(self, state: ControllerState) -> None:
        self.state = state
        self.conditions = tl.Conditions(dict(state.conditions))
        self.timeline = tl.Timeline([tl.Step(**_step_args(s)) for s in state.saga])
        if state.pending is not None:
            self.desire(state.pending)
        while True:
            await workflow.wait_condition(self._has_work)
            desired = self.desired
            assert desired is not None
            if desired.deleting:
                await self._teardown(desired)
                return
            await self._converge(desired)
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._snapshot())

    def _has_work(self) -> bool:
        desired = self.desired
        assert self.state is not None
        return desired is not None and (
            desired.deleting or desired.generation > self.state.handled_generation
        )

    def _newer_than(self, desired: v.Desired) -> bool:
        """A later write needs a different revision (replicas alone do not interrupt)."""
        latest = self.desired
        if latest is None or latest is desired:
            return False
        return latest.deleting or fingerprint(latest.spec) != fingerprint(desired.spec)

    async def _converge(self, desired: v.Desired) -> None:
        state = self.state
        assert state is not None
        stable = state.stable
        if desired.spec.get("target", "local") != "local":
            await self._unsupported_target(desired)
        elif stable is not None and stable.fingerprint == fingerprint(desired.spec):
            await self._scale(desired, stable)
        else:
            await self._deploy_interruptibly(desired)
        state.handled_generation = max(state.handled_generation, desired.generation)

    async def _deploy_interruptibly(self, desired: v.Desired) -> None:
        self.in_flight, self.interrupt = desired, None
        task = asyncio.create_task(self._deploy(desired))
        try:
            while not task.done():
                await workflow.wait_condition(
                    lambda: (
                        task.done()
                        or (
                            not self.committing
                            and (self.interrupt is not None or self._newer_than(desired))
                        )
                    )
                )
                if not task.done():
                    self.interrupt = self.interrupt or "Superseded"
                    task.cancel()
                    break
            with contextlib.suppress(asyncio.CancelledError, _Interrupted):
                await task
        finally:
            self.in_flight, self.canary, self.committing = None, None, False

    # -- one deploy -----------------------------------------------------------------

    async def _deploy(self, desired: v.Desired) -> None:
        state = self.state
        assert state is not None
        revision = state.next_revision
        state.next_revision += 1
        spec = desired.spec
        workflow_ref = spec["workflow"]
        ref, digest = str(workflow_ref["ref"]), str(workflow_ref["digest"])
        canary = spec.get("canary") or {}
        analysis = canary.get("analysis")
        self.timeline = tl.Timeline.of(STEPS)
        undo: list[tuple[str, Any]] = []
        step = "pull"
        self.conditions.set(
            "Progressing",
            True,
            "Deploying",
            f"deploying revision {revision} ({digest[:19]}) for generation {desired.generation}",
            now=workflow.now(),
            generation=desired.generation,
        )
        try:
            await self._begin(desired, step, f"pulling {ref}")
            pulled: v.PullResult = await workflow.execute_activity(
                "pull",
                args=[ref, digest],
                result_type=v.PullResult,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=_retry(4, non_retryable=SPEC_ERRORS),
            )
            await self._end(
                desired,
                step,
                f"{pulled.workflow} {pulled.digest} ({pulled.size} B)",
                attempt=pulled.attempt,
            )

            step = "resolve"
            await self._begin(desired, step, "choosing a backend")
            resolved: v.Resolved = await workflow.execute_activity(
                "resolve",
                args=[state.run.namespace, spec.get("backend") or {}, spec.get("gpuClass")],
                result_type=v.Resolved,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=_retry(4),
            )
            backend = resolved.backend
            await self._end(desired, step, _describe_backend(backend), attempt=resolved.attempt)

            step = "install"
            replicas = int(spec.get("replicas", 1))
            request = v.InstallRequest(
                run=state.run,
                revision=revision,
                ref=ref,
                digest=digest,
                backend=backend,
                replicas=max(1, replicas),
                cache=dict(spec.get("cache") or {}),
            )
            undo.append(("retire", v.RetireRequest(state.run, revision)))
            await self._begin(desired, step, f"starting {request.replicas} replica(s)")
            installed: v.Installed = await workflow.execute_activity(
                "install",
                request,
                result_type=v.Installed,
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=timedelta(seconds=5),
                retry_policy=_retry(3, non_retryable=SPEC_ERRORS),
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            await self._end(
                desired,
                step,
                f"revision {revision}: {installed.ready_replicas} ready at "
                + ", ".join(installed.endpoints),
                attempt=installed.attempt,
            )

            step = "smoke"
            smoke_spec = canary.get("smoke") or {}
            await self._begin(desired, step, "running the smoke case on the canary")
            smoke: v.SmokeResult = await workflow.execute_activity(
                "smoke",
                v.SmokeRequest(
                    ref=ref,
                    digest=digest,
                    endpoints=installed.endpoints,
                    inputs=smoke_spec.get("input"),
                    expect=smoke_spec.get("expect"),
                ),
                result_type=v.SmokeResult,
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=_retry(3, non_retryable=["SmokeFailed", *SPEC_ERRORS]),
            )
            await self._end(
                desired, step, smoke.message, skipped=smoke.skipped, attempt=smoke.attempt
            )

            step = "analyze"
            if analysis:
                weight = int(canary.get("weight", 10))
                if state.stable is not None:
                    undo.append(("traffic", None))
                    self.canary = (revision, digest, installed.endpoints, weight)
                await self._begin(desired, step, f"canary takes {weight}% of invocations")
                result: v.AnalysisResult = await workflow.execute_activity(
                    "analyze",
                    v.AnalysisRequest(
                        ref=ref,
                        digest=digest,
                        canary=installed.endpoints,
                        stable=state.stable.endpoints if state.stable else [],
                        requests=int(analysis.get("requests", 20)),
                        inputs=smoke_spec.get("input"),
                        max_error_rate=analysis.get("maxErrorRate"),
                        max_p95_milliseconds=analysis.get("maxP95Milliseconds"),
                    ),
                    result_type=v.AnalysisResult,
                    start_to_close_timeout=timedelta(minutes=10),
                    heartbeat_timeout=timedelta(seconds=10),
                    retry_policy=_retry(2, non_retryable=["AnalysisFailed", *SPEC_ERRORS]),
                )
                await self._end(desired, step, result.message, attempt=result.attempt)
            else:
                self.timeline.finish(step, workflow.now(), "Skipped", "no analysis configured")

            step = "promote"
            await self._begin(desired, step, f"promoting revision {revision}")
            undo.clear()  # the commit point: from here on the new revision serves
            self.committing, self.canary = True, None
            await self._promote(desired, revision, ref, digest, backend, installed, replicas)
        except (ActivityError, asyncio.CancelledError) as error:
            cancelled = isinstance(error, asyncio.CancelledError) or self.interrupt is not None
            self.committing = True  # compensation is not interrupted
            await self._compensate(desired, step, undo, error, revision, cancelled=cancelled)
            if cancelled:
                raise _Interrupted() from None

    async def _promote(
        self,
        desired: v.Desired,
        revision: int,
        ref: str,
        digest: str,
        backend: v.Backend,
        installed: v.Installed,
        replicas: int,
    ) -> None:
        state = self.state
        assert state is not None
        old = state.stable
        new = v.Deployment(
            revision=revision,
            digest=digest,
            ref=ref,
            backend=backend,
            replicas=max(1, replicas),
            endpoints=installed.endpoints,
            ready_replicas=installed.ready_replicas,
            fingerprint=fingerprint(desired.spec),
        )
        state.stable = new
        reason = f"rollback to revision {desired.rollback_to}" if desired.rollback_to else "deploy"
        state.history.append(
            {
                "revision": revision,
                "digest": digest,
                "ref": ref,
                "backend": backend.name or backend.type,
                "promotedAt": tl.rfc3339(workflow.now()),
                "reason": reason,
            }
        )
        del state.history[:-HISTORY_LIMIT]
        await self._report(desired)  # traffic moves to the new revision first
        if old is not None and old.revision != revision:
            await self._retire(old.revision)
        if replicas != new.replicas:  # replicas: 0 keeps the revision but no process
            await self._scale(desired, new)
        message = (
            f"revision {revision} ({digest[:19]}) serves {new.ready_replicas}/{replicas} replicas"
        )
        self.timeline.finish("promote", workflow.now(), "Succeeded", message)
        now, generation = workflow.now(), desired.generation
        self.conditions.set("Ready", True, "Promoted", message, now=now, generation=generation)
        self.conditions.set(
            "Progressing", False, "DeployComplete", message, now=now, generation=generation
        )
        self.conditions.set(
            "Degraded",
            False,
            "Healthy",
            "the last deploy succeeded",
            now=now,
            generation=generation,
        )
        state.phase = "Ready"
        await self._report(desired, event=("Normal", "Promoted", message))

    async def _compensate(
        self,
        desired: v.Desired,
        step: str,
        undo: list[tuple[str, Any]],
        error: BaseException,
        revision: int,
        *,
        cancelled: bool,
    ) -> None:
        state = self.state
        assert state is not None
        now = workflow.now()
        if cancelled:
            reason = self.interrupt or "Superseded"
            newer = self.desired.generation if self.desired else desired.generation
            message = (
                f"deploy of generation {desired.generation} aborted"
                if reason == "Aborted"
                else f"generation {desired.generation} superseded by generation {newer}"
            )
            self.timeline.finish(step, now, "Failed", message)
        else:
            failure_type, message, attempts = _failure(error)
            reason = REASONS.get(failure_type, FAILURE_STEP_REASON[step])
            self.timeline.set_attempts(step, attempts)
            self.timeline.finish(step, now, "Failed", message)
        self.timeline.skip_pending(now, f"not run: {step} did not succeed")
        state.phase = "RollingBack"
        await self._report(desired, event=("Warning", reason, message))
        if undo:
            self.timeline.start("rollback", workflow.now(), "removing the canary")
            for action, argument in reversed(undo):
                if action == "retire":
                    await self._retire(argument.revision)
                else:  # traffic back to the stable revision only
                    self.canary = None
                    await self._report(desired)
            self.timeline.finish(
                "rollback", workflow.now(), "Compensated", f"canary revision {revision} removed"
            )
        now, generation = workflow.now(), desired.generation
        if state.stable is not None:
            serving = f"revision {state.stable.revision} still serves"
            self.conditions.set(
                "Ready",
                True,
                "RolledBack",
                f"{message}; {serving}",
                now=now,
                generation=generation,
            )
            self.conditions.set(
                "Degraded", not cancelled, reason, message, now=now, generation=generation
            )
            state.phase = "Ready" if cancelled else "Degraded"
        else:
            self.conditions.set("Ready", False, reason, message, now=now, generation=generation)
            state.phase = "Pending" if cancelled else "Failed"
        self.conditions.set("Progressing", False, reason, message, now=now, generation=generation)
        event = "Normal" if cancelled else "Warning"
        await self._report(desired, event=(event, "RolledBack", f"{message}; canary removed"))

    async def _unsupported_target(self, desired: v.Desired) -> None:
        """Only the local target exists yet: say so instead of deploying somewhere else."""
        state = self.state
        assert state is not None
        target = desired.spec.get("target")
        message = f"spec.target {target!r} is not available in this installation; use target: local"
        now, generation = workflow.now(), desired.generation
        serving = state.stable is not None
        self.conditions.set(
            "Ready", serving, "TargetUnavailable", message, now=now, generation=generation
        )
        self.conditions.set(
            "Progressing", False, "TargetUnavailable", message, now=now, generation=generation
        )
        state.phase = "Degraded" if serving else "Failed"
        await self._report(desired, event=("Warning", "TargetUnavailable", message))

    # -- scale and teardown -----------------------------------------------------------

    async def _scale(self, desired: v.Desired, stable: v.Deployment) -> None:
        state = self.state
        assert state is not None
        replicas = int(desired.spec.get("replicas", 1))
        self.conditions.observe(desired.generation)
        if replicas != stable.replicas or stable.ready_replicas != replicas:
            installed: v.Installed = await workflow.execute_activity(
                "scale",
                v.InstallRequest(
                    run=state.run,
                    revision=stable.revision,
                    ref=stable.ref,
                    digest=stable.digest,
                    backend=stable.backend,
                    replicas=replicas,
                    cache=dict(desired.spec.get("cache") or {}),
                ),
                result_type=v.Installed,
                start_to_close_timeout=timedelta(minutes=5),
                heartbeat_timeout=timedelta(seconds=5),
                retry_policy=_retry(5),
            )
            old = stable.replicas
            stable.replicas, stable.endpoints = replicas, installed.endpoints
            stable.ready_replicas = installed.ready_replicas
            message = f"revision {stable.revision} scaled from {old} to {replicas} replicas"
            ready = self.conditions.get("Ready")
            if ready is not None and ready["status"] == "True" and ready["reason"] == "Promoted":
                self.conditions.set(
                    "Ready",
                    True,
                    "Promoted",
                    f"revision {stable.revision} ({stable.digest[:19]}) serves "
                    f"{stable.ready_replicas}/{replicas} replicas",
                    now=workflow.now(),
                    generation=desired.generation,
                )
            await self._report(desired, event=("Normal", "Scaled", message))
        else:
            await self._report(desired)

    async def _teardown(self, desired: v.Desired) -> None:
        state = self.state
        assert state is not None
        await workflow.execute_activity(
            "teardown",
            state.run,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=_retry(20),
        )
        await workflow.execute_activity(
            "release",
            state.run,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=_retry(50),
        )

    async def _retire(self, revision: int) -> None:
        state = self.state
        assert state is not None
        await workflow.execute_activity(
            "retire",
            v.RetireRequest(state.run, revision),
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=_retry(20),
        )

    # -- status -----------------------------------------------------------------------

    async def _begin(self, desired: v.Desired, step: str, message: str) -> None:
        state = self.state
        assert state is not None
        self.timeline.start(step, workflow.now(), message)
        state.phase = PHASES[step]
        await self._report(desired)

    async def _end(
        self,
        desired: v.Desired,
        step: str,
        message: str,
        *,
        skipped: bool = False,
        attempt: int = 1,
    ) -> None:
        self.timeline.set_attempts(step, attempt)
        self.timeline.finish(step, workflow.now(), "Skipped" if skipped else "Succeeded", message)
        reason = {"pull": "Pulled", "resolve": "Resolved", "install": "CanaryInstalled"}.get(
            step, "SmokePassed" if step == "smoke" else "AnalysisPassed"
        )
        await self._report(desired, event=("Normal", reason, message))

    async def _report(
        self, desired: v.Desired, *, event: tuple[str, str, str] | None = None
    ) -> None:
        state = self.state
        assert state is not None
        await workflow.execute_local_activity(
            "report",
            v.Report(
                run=state.run,
                status=self._status(desired),
                event_type=event[0] if event else None,
                event_reason=event[1] if event else None,
                event_message=event[2] if event else None,
            ),
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200),
                maximum_interval=timedelta(seconds=3),
                non_retryable_error_types=["ObjectGone"],
            ),
        )

    def _status(self, desired: v.Desired) -> dict[str, Any]:
        state = self.state
        assert state is not None
        stable = state.stable
        canary = self.canary
        traffic: list[dict[str, Any]] = []
        if stable is not None:
            share = 100 - (canary[3] if canary else 0)
            traffic.append(
                {
                    "revision": stable.revision,
                    "digest": stable.digest,
                    "weight": share,
                    "endpoints": stable.endpoints,
                }
            )
            if canary:
                traffic.append(
                    {
                        "revision": canary[0],
                        "digest": canary[1],
                        "weight": canary[3],
                        "endpoints": canary[2],
                    }
                )
        run = state.run
        status: dict[str, Any] = {
            "phase": state.phase,
            "observedGeneration": desired.generation,
            "conditions": self.conditions.to_json(),
            "saga": self.timeline.to_json(),
            "history": list(state.history),
            "traffic": traffic,
            "replicas": stable.replicas if stable else 0,
            "readyReplicas": stable.ready_replicas if stable else 0,
            "selector": f"plnt.work/run={run.name}",
        }
        if stable is not None:
            status.update(
                revision=stable.revision,
                digest=stable.digest,
                backend=stable.backend.name or stable.backend.type,
                endpoint=stable.endpoints[0] if stable.endpoints else None,
            )
        return status

    def _snapshot(self) -> ControllerState:
        state = self.state
        assert state is not None
        state.conditions = dict(self.conditions.items)
        state.saga = self.timeline.to_json()
        state.pending = self.desired
        return state


def _step_args(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": step["name"],
        "state": step.get("state", "Pending"),
        "attempts": step.get("attempts", 0),
        "start_time": step.get("startTime"),
        "end_time": step.get("endTime"),
        "message": step.get("message", ""),
    }


def _describe_backend(backend: v.Backend) -> str:
    name = backend.name or "(none)"
    where = f" at {backend.endpoint}" if backend.endpoint else ""
    model = f", model {backend.model}" if backend.model else ""
    return f"backend {name}: {backend.type}{where}{model}"


def _failure(error: BaseException) -> tuple[str, str, int]:
    """(type, message, attempts) of a failed activity."""
    cause = error.__cause__ if isinstance(error, ActivityError) else None
    if isinstance(cause, ApplicationError):
        attempts = cause.details[0] if cause.details and isinstance(cause.details[0], int) else 1
        return cause.type or "Error", cause.message, attempts
    return "Error", str(cause or error), 1
