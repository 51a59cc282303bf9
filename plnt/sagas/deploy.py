"""The deploy saga: one long-lived Temporal workflow per WorkflowRun.

Why one workflow per run and not one per deploy: "at most one deploy in flight, a
newer generation supersedes an older one" is then a property of a single piece of
sequential code instead of a race between workflows. The API server signal-with-starts
it (`desire`) on every accepted write; the workflow keeps only the newest desired
state, deploys it, and when a newer generation arrives mid-deploy it cancels the
in-flight saga, which compensates before the next one starts.

One deploy (`rollout.py`): pull → resolve → install (canary) → smoke → analyze
(optional) → promote, with compensation. A change of `spec.replicas` alone scales
the stable revision without a new revision. Deletion tears every replica down and
then releases the `plnt.work/teardown` finalizer. Status and Events: `reporting.py`.

The workflow does no I/O: activities (by name, `plnt.sagas.activities`) do it, and
`report` (a local activity) writes status and Events through the API server. The
history grows with each deploy, so the workflow continues as new when Temporal
suggests it, carrying its whole state.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import workflow

from plnt.sagas.reporting import ControllerState, step_args
from plnt.sagas.rollout import Interrupted, Rollout, fingerprint, retry, retry_delay

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import timeline as tl
    from plnt.sagas import values as v

__all__ = ["ControllerState", "WorkflowRunController", "fingerprint"]


@workflow.defn(name="WorkflowRunController")
class WorkflowRunController(Rollout):
    """The deploy saga of one WorkflowRun (see the module docstring)."""

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

    @workflow.update
    def promote(self) -> bool:
        """End the canary's pause now, so promotion follows; False when none is pausing."""
        if not self.pausing or self.committing or self.interrupt is not None:
            return False
        self.skip_pause = True
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
        self.timeline = tl.Timeline([tl.Step(**step_args(s)) for s in state.saga])
        if state.pending is not None:
            self.desire(state.pending)
        while True:
            await self._next_work()
            desired = self.desired
            assert desired is not None
            if desired.deleting:
                await self._teardown(desired)
                return
            await self._converge(desired)
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(self._snapshot())

    async def _next_work(self) -> None:
        """Until a write needs handling, or a retry of a transient failure is due."""
        state = self.state
        assert state is not None
        if not state.retries:
            await workflow.wait_condition(self._has_work)
            return
        delay = timedelta(seconds=retry_delay(state.retries))
        with contextlib.suppress(TimeoutError):  # due: converge the newest desired again
            await workflow.wait_condition(self._has_work, timeout=delay)

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
            state.retries = 0
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
            with contextlib.suppress(asyncio.CancelledError, Interrupted):
                await task
        finally:
            self.in_flight, self.canary, self.committing = None, None, False
            self.pausing = self.skip_pause = False

    # -- what is not a rollout ------------------------------------------------------

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

    async def _teardown(self, desired: v.Desired) -> None:
        state = self.state
        assert state is not None
        await workflow.execute_activity(
            "teardown",
            state.run,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=retry(20),
        )
        await workflow.execute_activity(
            "release",
            state.run,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=retry(50),
        )
