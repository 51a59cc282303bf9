"""The steps of one deploy, in order: pull → resolve → install → smoke → route → analyze →
evaluate → promote.

Each step calls its activity with its own timeout and retry policy; failures retrying
cannot fix are non-retryable by `Failure` (see `failures`). Install registers
"retire the canary", route "route back to the stable revision" (the run's Gateway API
HTTPRoute, when it has one: `routing` has the weights of every move) and analyze
"traffic back to the stable revision" before they run, so a failed canary's route is
put back before its release is removed; promote is the commit point, and moves the
route to the new revision, then drops the drained one. `STEPS` is the list
`rollout.roll_out` walks.

Replay: before typed activity inputs, pull and resolve took positional arguments.
Histories recorded then (no `TYPED_INPUTS` marker) replay through the old activity
names, which the worker still serves (`DeployActivities.pull_positional`,
`PlacementActivities.resolve_positional`).
Workflow code: no I/O here; the activities do it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from plnt.api.meta import format_time
    from plnt.sagas import activitynames, routing
    from plnt.sagas import failures as f
    from plnt.sagas import values as v
    from plnt.sagas.deploying.workflow import scaling
    from plnt.sagas.deploying.workflow.compensation import Compensation
    from plnt.sagas.deploying.workflow.deploys import Deploy, Step
    from plnt.sagas.deploying.workflow.reporting import Event, Outcome
    from plnt.sagas.gating.workflow import ANALYZE, Evaluate, Smoke

TYPED_INPUTS = "typed-activity-inputs"
"""The patch that gave pull and resolve one typed input each (`workflow.patched`)."""

HISTORY_LIMIT = 10
"""Promoted revisions kept in `status.history` (what `/rollback` can return to)."""


async def retire(run: v.RunRef, revision: int, target: str) -> None:
    """Stop every replica of `revision` (an undo, and promotion's retirement of the old)."""
    await workflow.execute_activity(
        activitynames.RETIRE,
        v.RetireRequest(run, revision, target),
        start_to_close_timeout=timedelta(minutes=1),
        retry_policy=f.retry(20),
    )


async def move_route(deploy: Deploy, backends: list[v.RouteBackend]) -> v.Routed:
    """Set the run's HTTPRoute to `backends` (none: remove it)."""
    intent = deploy.intent
    routed: v.Routed = await workflow.execute_activity(
        activitynames.ROUTE,
        v.RouteRequest(deploy.state.run, backends, intent.route, intent.spec.target),
        result_type=v.Routed,
        start_to_close_timeout=timedelta(minutes=1),
        retry_policy=f.retry(10),
    )
    return routed


async def announce_route(deploy: Deploy, backends: list[v.RouteBackend], why: str) -> None:
    """A move that is not a step of its own (promotion's, an undo): the move, then its Event
    (`why` tells moves to the same weights apart, which kube would count as one Event)."""
    routed = await move_route(deploy, backends)
    message = f"{routed.message} ({why})"
    await deploy.reporter.publish(deploy.intent, Event("Normal", "TrafficShifted", message))


class Pull(Step):
    name, phase, done, fails_as = "pull", "Pulling", "Pulled", "PullFailed"

    def enter(self, deploy: Deploy) -> str:
        return f"pulling {deploy.ref}"

    async def run(self, deploy: Deploy) -> Outcome:
        timeout, policy = timedelta(seconds=60), f.retry(4, non_retryable=f.SPEC_ERRORS)
        if workflow.patched(TYPED_INPUTS):
            pulled = await workflow.execute_activity(
                activitynames.PULL_SPEC,
                deploy.pull_request(),
                result_type=v.PullResult,
                start_to_close_timeout=timeout,
                retry_policy=policy,
            )
        else:
            pulled = await workflow.execute_activity(
                activitynames.PULL_POSITIONAL,
                args=[deploy.ref, deploy.digest],
                result_type=v.PullResult,
                start_to_close_timeout=timeout,
                retry_policy=policy,
            )
        deploy.pulled = pulled
        signed = f", signed by {pulled.signer}" if pulled.signer else ""
        return Outcome(
            f"{pulled.workflow} {pulled.digest} ({pulled.size} B{signed})", pulled.attempt
        )


class Resolve(Step):
    name, phase, done, fails_as = "resolve", "Resolving", "Resolved", "BackendUnavailable"

    def enter(self, deploy: Deploy) -> str:
        return "choosing a backend"

    async def run(self, deploy: Deploy) -> Outcome:
        namespace = deploy.state.run.namespace
        timeout, policy = timedelta(seconds=30), f.retry(4)
        if workflow.patched(TYPED_INPUTS):
            resolved = await workflow.execute_activity(
                activitynames.RESOLVE_BACKEND,
                deploy.intent.resolve_request(namespace),
                result_type=v.Resolved,
                start_to_close_timeout=timeout,
                retry_policy=policy,
            )
        else:
            resolved = await workflow.execute_activity(
                activitynames.RESOLVE_POSITIONAL,
                args=deploy.intent.positional_resolve_args(namespace),
                result_type=v.Resolved,
                start_to_close_timeout=timeout,
                retry_policy=policy,
            )
        deploy.backend = resolved.backend
        message = describe_backend(resolved.backend, resolved.headroom)
        if resolved.explanation:
            message = f"{message}; {resolved.explanation}"
        return Outcome(message, resolved.attempt)


class Install(Step):
    name, phase, done, fails_as = "install", "Deploying", "CanaryInstalled", "InstallFailed"

    def compensation(self, deploy: Deploy) -> Compensation:
        run, revision, target = deploy.state.run, deploy.revision, deploy.intent.spec.target

        async def retire_canary() -> None:
            await retire(run, revision, target)

        return Compensation(f"retire revision {revision}", retire_canary)

    def enter(self, deploy: Deploy) -> str:
        return f"starting {deploy.replicas} replica(s)"

    async def run(self, deploy: Deploy) -> Outcome:
        installed = await workflow.execute_activity(
            activitynames.INSTALL,
            v.InstallRequest(
                run=deploy.state.run,
                revision=deploy.revision,
                ref=deploy.ref,
                digest=deploy.digest,
                backend=deploy.resolved(),
                replicas=deploy.replicas,
                cache=deploy.intent.cache,
                target=deploy.intent.spec.target,
                gpu_class=deploy.intent.spec.gpu_class,
                route=deploy.intent.route,
            ),
            result_type=v.Installed,
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(seconds=5),
            retry_policy=f.retry(3, non_retryable=f.SPEC_ERRORS),
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        deploy.installed = installed
        where = ", ".join(installed.endpoints)
        message = f"revision {deploy.revision}: {installed.ready_replicas} ready at {where}"
        return Outcome(message, installed.attempt)


class Route(Step):
    """The canary takes its weight of applications' traffic at the Gateway.

    Applications in the cluster call the run's HTTPRoute, not plnt's `…/invoke`: the
    route carries the same weights (the stable `100 - weight`, the canary `weight`) for
    as long as the analysis and the pause run. Its undo puts the route back on the stable
    revision; it is registered after install's, so it runs before the canary's release
    is removed. Skipped when the run has no route, on a first deploy (the route is made
    at promotion), and when nothing holds the canary's weight (no analysis, no pause).
    """

    name, phase, done, fails_as = "route", "SmokeTesting", "TrafficShifted", "RouteFailed"

    def skip(self, deploy: Deploy) -> str | None:
        if deploy.canary().route is None:
            return "no HTTPRoute"
        if deploy.state.stable is None:
            return "a first deploy has no stable revision to share with; routed at promotion"
        if ANALYZE.skip(deploy) is not None:
            return "the canary takes no traffic before promotion"
        return None

    def compensation(self, deploy: Deploy) -> Compensation | None:
        stable = deploy.state.stable
        if stable is None:
            return None
        revision = stable.revision

        async def route_back() -> None:
            await announce_route(deploy, routing.withdrawn(revision), "back to the stable revision")

        return Compensation("route back to the stable revision", route_back)

    def enter(self, deploy: Deploy) -> str:
        weight = deploy.intent.canary.weight
        return f"HTTPRoute {deploy.canary().route}: the canary takes {weight}%"

    async def run(self, deploy: Deploy) -> Outcome:
        stable = deploy.state.stable
        assert stable is not None, "skipped on a first deploy"
        plan = routing.canary(stable.revision, deploy.revision, deploy.intent.canary.weight)
        routed = await move_route(deploy, plan)
        return Outcome(routed.message, routed.attempt)


class Promote(Step):
    """The commit point: traffic moves to the new revision, the old one is retired (after
    `canary.drainSeconds`, a durable timer, when the run sets one)."""

    name, phase, done, fails_as = "promote", "Promoting", "Promoted", "PromoteFailed"
    commits = True

    def enter(self, deploy: Deploy) -> str:
        return f"promoting revision {deploy.revision}"

    async def run(self, deploy: Deploy) -> Outcome:
        state, intent, installed = deploy.state, deploy.intent, deploy.canary()
        old, replicas = state.stable, intent.spec.replicas
        new = v.Deployment(
            revision=deploy.revision,
            digest=deploy.digest,
            ref=deploy.ref,
            backend=deploy.resolved(),
            replicas=deploy.replicas,
            endpoints=installed.endpoints,
            ready_replicas=installed.ready_replicas,
            fingerprint=intent.fingerprint,
            target=intent.spec.target,
            route=installed.route,
        )
        state.stable, state.retries = new, 0
        _record(deploy, new)
        await deploy.reporter.publish(intent)  # traffic moves to the new revision first
        draining = old is not None and old.revision != new.revision
        if new.route is not None:  # applications' traffic too: 100/0 while the old drains
            plan = routing.promoted(new.revision, old.revision if old is not None else None)
            await announce_route(deploy, plan, f"revision {new.revision} promoted")
        elif old is not None and old.route is not None:  # the run has no route any more
            await announce_route(deploy, [], "the run has no route any more")
        if old is not None and draining:
            if drain := intent.canary.drain_seconds:  # in-flight invocations finish
                await workflow.sleep(drain)
            if new.route is not None:  # the drained revision leaves the route first
                await announce_route(
                    deploy, routing.drained(new.revision), f"revision {old.revision} drained"
                )
            await retire(state.run, old.revision, old.target)
        if replicas != new.replicas:  # replicas: 0 keeps the revision but no process
            await scaling.scale(deploy.reporter, intent, new)
        return Outcome(
            f"revision {new.revision} ({new.digest[:19]}) serves "
            f"{new.ready_replicas}/{replicas} replicas"
        )


def _record(deploy: Deploy, new: v.Deployment) -> None:
    """Add the promoted revision to `status.history` (the newest `HISTORY_LIMIT` stay)."""
    rollback_to = deploy.intent.rollback_to
    history = deploy.state.history
    record = {
        "revision": new.revision,
        "digest": new.digest,
        "ref": new.ref,
        "backend": new.backend.name or new.backend.type,
        "promotedAt": format_time(workflow.now()),
        "reason": f"rollback to revision {rollback_to}" if rollback_to else "deploy",
    }
    if deploy.pulled is not None and deploy.pulled.signer:
        record["signedBy"] = deploy.pulled.signer
    history.append(record)
    del history[:-HISTORY_LIMIT]


def describe_backend(backend: v.Backend, headroom: int | None = None) -> str:
    name = backend.name or "(none)"
    where = f" at {backend.endpoint}" if backend.endpoint else ""
    model = f", model {backend.model}" if backend.model else ""
    room = f", headroom {headroom}" if headroom is not None else ""
    spare = backend.fallback
    fallback = f", fallback {spare.name or spare.type}" if spare is not None else ""
    return f"backend {name}: {backend.type}{where}{model}{room}{fallback}"


STEPS: tuple[Step, ...] = (
    Pull(),
    Resolve(),
    Install(),
    Smoke(),
    Route(),
    ANALYZE,
    Evaluate(),
    Promote(),
)
"""The deploy, in order."""
