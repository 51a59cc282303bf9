"""Walking one deploy's steps, and compensating when one fails or the deploy is interrupted.

For each step: a step with nothing to do is recorded as Skipped; otherwise its undo is
pushed on the compensation stack, the reporter shows it Running, it runs, and the
reporter shows how it ended. The commit step (promote) clears the stack as it begins.
A failed activity, or a cancellation (abort, or a newer generation), ends the walk:
the reporter records the failure, the stack unwinds, and the conditions say what
still serves. A failure time may fix (`Failure.transient`) schedules another try of
the same generation. Workflow code: no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import failures as f
    from plnt.sagas.deploying.workflow.deploys import Deploy, Step
    from plnt.sagas.deploying.workflow.steps import STEPS


class Interrupted(Exception):
    """The deploy was superseded or aborted (after its compensation ran)."""


async def roll_out(deploy: Deploy, steps: Sequence[Step] = STEPS) -> None:
    """Run `steps` in order; on failure or cancellation, compensate (see the module doc)."""
    deploy.reporter.deploying(
        deploy.intent, [s.name for s in steps], deploy.revision, deploy.digest
    )
    step = steps[0]
    try:
        for step in steps:
            await _walk(deploy, step)
    except (ActivityError, f.GateFailed, asyncio.CancelledError) as error:
        controls = deploy.controls
        interrupted = isinstance(error, asyncio.CancelledError) or controls.interrupt is not None
        controls.committing = True  # compensation is not interrupted
        await _compensate(deploy, step, error, interrupted=interrupted)
        if interrupted:
            raise Interrupted() from None


async def _walk(deploy: Deploy, step: Step) -> None:
    reporter, intent = deploy.reporter, deploy.intent
    reason = step.skip(deploy)
    if reason is not None:
        reporter.skip(step.name, reason)
        return
    compensation = step.compensation(deploy)
    if compensation is not None:
        deploy.compensations.push(compensation)
    await reporter.begin(intent, step.name, step.phase, step.enter(deploy))
    if step.commits:  # from here on the new revision serves
        deploy.compensations.commit()
        deploy.controls.committing, reporter.canary = True, None
    outcome = await step.run(deploy)
    if step.commits:
        await reporter.promoted(intent, step.name, outcome.message)
    else:
        await reporter.end(intent, step.name, step.done, outcome)


async def _compensate(
    deploy: Deploy, step: Step, error: BaseException, *, interrupted: bool
) -> None:
    state, intent, reporter = deploy.state, deploy.intent, deploy.reporter
    if interrupted:
        reason, message, attempts = _interruption(deploy)
        transient = False
    else:
        failed = f.of(error)
        reason = failed.failure.reason(step_reason=step.fails_as)
        message, attempts, transient = failed.message, failed.attempts, failed.failure.transient
    announce = message
    if transient:
        state.retries += 1
        announce = f"{message}; retrying in {f.retry_delay(state.retries)} s"
    else:
        state.retries = 0
    await reporter.failed(intent, step.name, reason, message, attempts=attempts, announce=announce)
    if deploy.compensations:
        reporter.compensating()
        await deploy.compensations.unwind()
        reporter.compensated(deploy.revision)
    await reporter.rolled_back(
        intent, reason, announce, interrupted=interrupted, retrying=transient
    )


def _interruption(deploy: Deploy) -> tuple[str, str, None]:
    """(reason, message, no attempts) of a deploy cancelled by an abort or a newer write."""
    controls, generation = deploy.controls, deploy.intent.generation
    reason = controls.interrupt or "Superseded"
    if reason == "Aborted":
        return reason, f"deploy of generation {generation} aborted", None
    newer = controls.desired.generation if controls.desired else generation
    return reason, f"generation {generation} superseded by generation {newer}", None
