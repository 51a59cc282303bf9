"""The deploy saga: one long-lived Temporal workflow per WorkflowRun.

Why one workflow per run and not one per deploy: "at most one deploy in flight, a
newer generation supersedes an older one" is then a property of a single piece of
sequential code instead of a race between workflows. The API server signal-with-starts
it (`desire`) on every accepted write; the workflow keeps only the newest desired
state, deploys it, and when a newer generation arrives mid-deploy it cancels the
in-flight saga, which compensates before the next one starts.

The controller decides *what* a generation needs: a deploy (`rollout.roll_out` over
`steps.STEPS`), a scale of the stable revision (`scaling`), or the teardown that
releases the `plnt.work/teardown` finalizer. Status and Events go out only through
its `reporting.Reporter`. The history grows with each deploy, so the workflow
continues as new when Temporal suggests it, carrying its whole state.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import activitynames
    from plnt.sagas import failures as f
    from plnt.sagas import values as v
    from plnt.sagas.deploying.workflow import scaling
    from plnt.sagas.deploying.workflow.deploys import Controls, Deploy
    from plnt.sagas.deploying.workflow.intents import Intent
    from plnt.sagas.deploying.workflow.reporting import Event, Reporter
    from plnt.sagas.deploying.workflow.rollout import Interrupted, roll_out


KUBERNETES_TARGET = "kubernetes-target"
"""The patch from which `spec.target: kubernetes` deploys (a worker without a cluster
answers `TargetUnavailable`) instead of being refused by the workflow itself."""


@workflow.defn(name="WorkflowRunController")
class WorkflowRunController:
    """The deploy saga of one WorkflowRun (see the module docstring)."""

    def __init__(self) -> None:
        self.controls = Controls()
        self._reporter: Reporter | None = None
        self._state: v.ControllerState | None = None

    @property
    def reporter(self) -> Reporter:
        assert self._reporter is not None, "set when the workflow starts"
        return self._reporter

    # -- handlers -------------------------------------------------------------------

    @workflow.signal
    def desire(self, desired: v.Desired) -> None:
        """A write was accepted: remember the newest desired state (or the deletion)."""
        current = self.controls.desired
        if current is not None and current.deleting:
            return  # deletion is final
        if current is None or desired.deleting or desired.generation >= current.generation:
            self.controls.desired = Intent.of(desired)

    @workflow.update
    def abort(self) -> bool:
        """Cancel the in-flight deploy (compensation runs); False when none is in flight."""
        controls = self.controls
        if controls.in_flight is None or controls.committing:
            return False
        controls.interrupt = "Aborted"
        return True

    @workflow.update
    def promote(self) -> bool:
        """End the canary's pause now, so promotion follows; False when none is pausing."""
        controls = self.controls
        if not controls.pausing or controls.committing or controls.interrupt is not None:
            return False
        controls.skip_pause = True
        return True

    @workflow.update
    def retry(self) -> bool:
        """Try the generation that failed for a transient reason again now, instead of
        after the backoff; False when nothing waits for a retry."""
        state = self._state
        if state is None or not state.retries or self.controls.in_flight is not None:
            return False
        self.controls.retry_now = True
        return True

    @workflow.query
    def deploying(self) -> int | None:
        """The generation being deployed right now, if any."""
        in_flight = self.controls.in_flight
        return in_flight.generation if in_flight else None

    # -- main loop ------------------------------------------------------------------

    @workflow.run
    async def run(self, state: v.ControllerState) -> None:
        self._reporter, self._state = Reporter(state), state
        if state.pending is not None:
            self.desire(state.pending)
        while True:
            await self._next_work(state)
            intent = self.controls.desired
            assert intent is not None
            if intent.deleting:
                await _teardown(state.run)
                return
            await self._converge(state, intent)
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                desired = self.controls.desired
                workflow.continue_as_new(
                    self.reporter.snapshot(desired.desired if desired else None)
                )

    async def _next_work(self, state: v.ControllerState) -> None:
        """Until a write needs handling, or a retry of a transient failure is due."""
        if not state.retries:
            await workflow.wait_condition(lambda: self._has_work(state))
            return
        delay = timedelta(seconds=f.retry_delay(state.retries))
        with contextlib.suppress(TimeoutError):  # due: converge the newest desired again
            await workflow.wait_condition(
                lambda: self._has_work(state) or self.controls.retry_now, timeout=delay
            )
        self.controls.retry_now = False

    def _has_work(self, state: v.ControllerState) -> bool:
        intent = self.controls.desired
        return intent is not None and (
            intent.deleting or intent.generation > state.handled_generation
        )

    async def _converge(self, state: v.ControllerState, intent: Intent) -> None:
        stable = state.stable
        if intent.spec.target != "local" and not workflow.patched(KUBERNETES_TARGET):
            state.retries = 0
            await self._unsupported_target(state, intent)
        elif stable is not None and stable.fingerprint == intent.fingerprint:
            self.reporter.reconciled()  # the revision serves; a failed scale says Stalled
            await scaling.scale(self.reporter, intent, stable)
        else:
            await self._deploy_interruptibly(state, intent)
        state.handled_generation = max(state.handled_generation, intent.generation)

    # -- one deploy, interruptible ----------------------------------------------------

    async def _deploy_interruptibly(self, state: v.ControllerState, intent: Intent) -> None:
        controls = self.controls
        controls.in_flight, controls.interrupt = intent, None
        deploy = Deploy(intent, state.next_revision, state, self.reporter, controls)
        state.next_revision += 1
        task = asyncio.create_task(roll_out(deploy))
        try:
            await workflow.wait_condition(lambda: task.done() or self._must_stop(intent))
            if not task.done():
                controls.interrupt = controls.interrupt or "Superseded"
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Interrupted):
                await task
        finally:
            controls.settle()
            self.reporter.canary = None

    def _must_stop(self, intent: Intent) -> bool:
        """An abort, or a later write that needs another revision (replicas alone do not)."""
        controls = self.controls
        if controls.committing:
            return False
        if controls.interrupt is not None:
            return True
        latest = controls.desired
        if latest is None or latest is intent:
            return False
        return latest.deleting or latest.fingerprint != intent.fingerprint

    # -- what is not a rollout ------------------------------------------------------

    async def _unsupported_target(self, state: v.ControllerState, intent: Intent) -> None:
        """Sagas that began before the Kubernetes target (no `KUBERNETES_TARGET` marker)
        refuse any target but local, as they did then."""
        reporter = self.reporter
        message = (
            f"spec.target {intent.spec.target!r} is not available in this installation;"
            " use target: local"
        )
        serving = state.stable is not None
        reporter.set("Ready", serving, "TargetUnavailable", message, intent=intent)
        reporter.set("Progressing", False, "TargetUnavailable", message, intent=intent)
        reporter.stalled(intent, "TargetUnavailable", message)
        state.phase = "Degraded" if serving else "Failed"
        await reporter.publish(intent, Event("Warning", "TargetUnavailable", message))


async def _teardown(run: v.RunRef) -> None:
    """Stop every replica of every revision, then release the teardown finalizer."""
    await workflow.execute_activity(
        activitynames.TEARDOWN,
        run,
        start_to_close_timeout=timedelta(minutes=2),
        retry_policy=f.retry(20),
    )
    await workflow.execute_activity(
        activitynames.RELEASE,
        run,
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=f.retry(50),
    )
