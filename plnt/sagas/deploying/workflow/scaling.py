"""Scaling the stable revision in place: a change of `spec.replicas` alone makes no revision.

Used by the controller for a replicas-only generation and by promotion when the run
asks for zero replicas (the canary always starts one). A failed scale leaves the stable
revision with what it has, says so in Degraded (Reconciling stays true: the controller
tries again by itself after `failures.retry_delay`). Workflow code: no I/O; the `scale`
activity does it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import activitynames
    from plnt.sagas import failures as f
    from plnt.sagas import values as v
    from plnt.sagas.deploying.workflow.intents import Intent
    from plnt.sagas.deploying.workflow.reporting import Event, Reporter


async def scale(reporter: Reporter, intent: Intent, stable: v.Deployment) -> None:
    """Make `stable` run `intent`'s replicas; publish the status either way."""
    replicas = intent.spec.replicas
    reporter.conditions.observe(intent.generation)
    if replicas == stable.replicas and stable.ready_replicas == replicas:
        await reporter.publish(intent)
        return
    try:
        installed = await workflow.execute_activity(
            activitynames.SCALE,
            v.InstallRequest(
                run=reporter.state.run,
                revision=stable.revision,
                ref=stable.ref,
                digest=stable.digest,
                backend=stable.backend,
                replicas=replicas,
                cache=intent.cache,
                target=stable.target,
                gpu_class=intent.spec.gpu_class,
            ),
            result_type=v.Installed,
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(seconds=5),
            retry_policy=f.retry(5),
        )
    except ActivityError as error:
        await _failed(reporter, intent, error)
        return
    reporter.state.retries = 0
    old = stable.replicas
    stable.replicas, stable.endpoints = replicas, installed.endpoints
    stable.ready_replicas = installed.ready_replicas
    ready = reporter.conditions.get("Ready")
    if ready is not None and ready["status"] == "True" and ready["reason"] == "Promoted":
        serves = (
            f"revision {stable.revision} ({stable.digest[:19]}) serves "
            f"{stable.ready_replicas}/{replicas} replicas"
        )
        reporter.set("Ready", True, "Promoted", serves, intent=intent)
    message = f"revision {stable.revision} scaled from {old} to {replicas} replicas"
    await reporter.publish(intent, Event("Normal", "Scaled", message))


async def _failed(reporter: Reporter, intent: Intent, error: ActivityError) -> None:
    """The stable revision keeps what it has; the saga tries the scale again later."""
    reporter.state.retries += 1
    why = f.of(error).message
    delay = f.retry_delay(reporter.state.retries)
    message = f"scaling failed: {why}; retrying in {delay} s"
    reporter.set("Degraded", True, "ScaleFailed", message, intent=intent)
    reporter.reconciling(intent, "ScaleFailed", message)  # the saga retries it by itself
    await reporter.publish(intent, Event("Warning", "ScaleFailed", message))
