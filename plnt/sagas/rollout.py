"""One deploy of a WorkflowRun: pull → resolve → install → smoke → analyze → promote.

The undo of a step is registered before the step runs; a failure (or a cancellation
because a newer generation superseded the deploy, or an abort) runs the registered
undos in reverse, so a failed canary never stays behind and the stable revision keeps
serving. Promotion is the commit point: from there on nothing interrupts the deploy.
Each activity has its own retry policy; failures that retrying cannot fix are
non-retryable by type (`SPEC_ERRORS`, SmokeFailed, AnalysisFailed) and become the
condition reasons in `REASONS`. The analyze step may also pause with the canary taking
its weight of live traffic (`canary.pauseSeconds`); `promote` ends a pause early.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import ActivityCancellationType

from plnt.sagas.reporting import SagaBase

with workflow.unsafe.imports_passed_through():
    from plnt.api.meta import format_time
    from plnt.sagas import timeline as tl
    from plnt.sagas import values as v

HISTORY_LIMIT = 10
STEPS = ["pull", "resolve", "install", "smoke", "analyze", "promote"]
# Failure type (ApplicationError.type) → the condition reason a human acts on.
REASONS = {
    "DigestMismatch": "DigestMismatch",
    "InvalidSpec": "InvalidSpec",
    "InvalidReference": "InvalidSpec",
    "SpecNotFound": "SpecNotFound",
    "BackendUnavailable": "BackendUnavailable",
    "NoBackend": "BackendUnavailable",
    "InstallFailed": "InstallFailed",
    "CredentialsMissing": "CredentialsMissing",
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


def retry(attempts: int, *, non_retryable: list[str] | None = None) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(milliseconds=250),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=5),
        maximum_attempts=attempts,
        non_retryable_error_types=non_retryable or [],
    )


SPEC_ERRORS = ["DigestMismatch", "InvalidSpec", "InvalidReference", "SpecNotFound"]

# Failures that time may fix (a registry or backend that is down, a runner that did not
# start, a backend secret not written yet): the saga tries the same generation again
# after `retry_delay`. Everything else (a bad spec, a failed smoke or analysis) waits
# for a new generation.
TRANSIENT = frozenset(
    {
        "PullFailed",
        "NoBackend",
        "InstallFailed",
        "CredentialsMissing",
        "Unreachable",
        "Conflict",
        "Error",
        "ScaleFailed",
    }
)
RETRY_FIRST_SECONDS = 10
RETRY_MAX_SECONDS = 300


def retry_delay(retries: int) -> int:
    """Seconds before retry number `retries` (1, 2, …): 10 s doubling up to 5 minutes."""
    return min(RETRY_FIRST_SECONDS << min(max(retries - 1, 0), 16), RETRY_MAX_SECONDS)


class Interrupted(Exception):
    """The in-flight deploy was superseded or aborted (after its compensation ran)."""


def fingerprint(spec: dict[str, Any]) -> str:
    """What makes a new revision: everything in the spec except replicas and canary settings."""
    relevant = {k: spec.get(k) for k in ("workflow", "backend", "gpuClass", "target", "cache")}
    return json.dumps(relevant, sort_keys=True, separators=(",", ":"))


class Rollout(SagaBase):
    """The steps of one deploy, its compensation, and scaling of the stable revision."""

    async def _deploy(self, desired: v.Desired) -> None:
        state = self.state
        assert state is not None
        revision = state.next_revision
        state.next_revision += 1
        spec = desired.spec
        workflow_ref = spec["workflow"]
        ref, digest = str(workflow_ref["ref"]), str(workflow_ref["digest"])
        canary = spec.get("canary") or {}
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
                retry_policy=retry(4, non_retryable=SPEC_ERRORS),
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
                retry_policy=retry(4),
            )
            backend = resolved.backend
            described = describe_backend(backend, resolved.headroom)
            await self._end(desired, step, described, attempt=resolved.attempt)

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
                retry_policy=retry(3, non_retryable=SPEC_ERRORS),
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
                retry_policy=retry(3, non_retryable=["SmokeFailed", *SPEC_ERRORS]),
            )
            await self._end(
                desired, step, smoke.message, skipped=smoke.skipped, attempt=smoke.attempt
            )

            step = "analyze"
            await self._observe(desired, canary, installed, revision, ref, digest, undo)

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
                raise Interrupted() from None

    async def _observe(
        self,
        desired: v.Desired,
        canary: dict[str, Any],
        installed: v.Installed,
        revision: int,
        ref: str,
        digest: str,
        undo: list[tuple[str, Any]],
    ) -> None:
        """The analyze step: the synthetic analysis, then the pause with live traffic.

        While either runs, the canary takes `weight` percent of invocations (when a stable
        revision exists to take the rest). A pause is a durable timer, so an abort or a
        newer generation cancels it like any activity, and compensation moves the traffic
        back. A first deploy has no stable revision to share traffic with: no pause.
        """
        state = self.state
        assert state is not None
        analysis = canary.get("analysis")
        pause = int(canary.get("pauseSeconds", 0)) if state.stable is not None else 0
        if not analysis and not pause:
            reason = "no analysis configured"
            if canary.get("pauseSeconds") and state.stable is None:
                reason += "; a first deploy has no stable revision to pause beside"
            self.timeline.finish("analyze", workflow.now(), "Skipped", reason)
            return
        weight = int(canary.get("weight", 10))
        if state.stable is not None:
            undo.append(("traffic", None))
            self.canary = (revision, digest, installed.endpoints, weight)
        held = f" for {pause} s" if pause else ""
        await self._begin(desired, "analyze", f"canary takes {weight}% of invocations{held}")
        verdicts: list[str] = []
        attempt = 1
        if analysis:
            smoke_spec = canary.get("smoke") or {}
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
                retry_policy=retry(2, non_retryable=["AnalysisFailed", *SPEC_ERRORS]),
            )
            verdicts.append(result.message)
            attempt = result.attempt
        if pause:
            verdicts.append(await self._pause(weight, pause))
        await self._end(desired, "analyze", "; ".join(verdicts), attempt=attempt)

    async def _pause(self, weight: int, seconds: int) -> str:
        """Hold the canary's weight for `seconds`, or until `promote` ends the pause."""
        began = workflow.now()
        self.pausing, self.skip_pause = True, False
        try:
            await workflow.wait_condition(lambda: self.skip_pause, timeout=seconds)
        except TimeoutError:
            return f"canary held {weight}% of invocations for {seconds} s"
        finally:
            self.pausing = False
        held = int((workflow.now() - began).total_seconds())
        return f"canary held {weight}% of invocations for {held} s, then promoted on request"

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
        state.retries = 0
        reason = f"rollback to revision {desired.rollback_to}" if desired.rollback_to else "deploy"
        state.history.append(
            {
                "revision": revision,
                "digest": digest,
                "ref": ref,
                "backend": backend.name or backend.type,
                "promotedAt": format_time(workflow.now()),
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
        failure_type = ""
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
            failure_type, message, attempts = failure(error)
            reason = REASONS.get(failure_type, FAILURE_STEP_REASON[step])
            self.timeline.set_attempts(step, attempts)
            self.timeline.finish(step, now, "Failed", message)
        if not cancelled and failure_type in TRANSIENT:
            state.retries += 1
            message = f"{message}; retrying in {retry_delay(state.retries)} s"
        else:
            state.retries = 0
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

    async def _scale(self, desired: v.Desired, stable: v.Deployment) -> None:
        state = self.state
        assert state is not None
        replicas = int(desired.spec.get("replicas", 1))
        self.conditions.observe(desired.generation)
        if replicas != stable.replicas or stable.ready_replicas != replicas:
            try:
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
                    retry_policy=retry(5),
                )
            except ActivityError as error:
                await self._scale_failed(desired, error)
                return
            state.retries = 0
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

    async def _scale_failed(self, desired: v.Desired, error: ActivityError) -> None:
        """The stable revision keeps what it has; the saga tries the scale again later."""
        state = self.state
        assert state is not None
        state.retries += 1
        _, why, _ = failure(error)
        message = f"scaling failed: {why}; retrying in {retry_delay(state.retries)} s"
        self.conditions.set(
            "Degraded",
            True,
            "ScaleFailed",
            message,
            now=workflow.now(),
            generation=desired.generation,
        )
        await self._report(desired, event=("Warning", "ScaleFailed", message))

    async def _retire(self, revision: int) -> None:
        state = self.state
        assert state is not None
        await workflow.execute_activity(
            "retire",
            v.RetireRequest(state.run, revision),
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=retry(20),
        )


def describe_backend(backend: v.Backend, headroom: int | None = None) -> str:
    name = backend.name or "(none)"
    where = f" at {backend.endpoint}" if backend.endpoint else ""
    model = f", model {backend.model}" if backend.model else ""
    room = f", headroom {headroom}" if headroom is not None else ""
    return f"backend {name}: {backend.type}{where}{model}{room}"


def failure(error: BaseException) -> tuple[str, str, int]:
    """(type, message, attempts) of a failed activity."""
    cause = error.__cause__ if isinstance(error, ActivityError) else None
    if isinstance(cause, ApplicationError):
        attempts = cause.details[0] if cause.details and isinstance(cause.details[0], int) else 1
        return cause.type or "Error", cause.message, attempts
    return "Error", str(cause or error), 1
