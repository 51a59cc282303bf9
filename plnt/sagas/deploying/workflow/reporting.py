"""How the saga says what it does: the one writer of status, timeline, conditions and Events.

Steps never touch the timeline or the conditions; the rollout tells the `Reporter` that
a step began, ended, was skipped or failed, and the reporter renders the fields of
`WorkflowRun.status` the saga owns and sends them (with an optional Event) through
`report`, a local activity that writes through the API server. Every call that
publishes is one `report` in the workflow's history, so their number and order are part
of the history format. Workflow code: no I/O, no clock but `workflow.now()`.

The reporter also keeps kstatus's conventions (what Helm's `--wait`, Flux and kpt read;
see `docs/gitops.md`): `Reconciling=True` while a generation is being deployed (also
while a failure waits for its retry, and when a newer generation follows a superseded
deploy), `Stalled=True` with the failure's reason when the saga stopped short of the
generation and will not move on by itself (a failure no retry fixes, an abort), and
neither once the generation serves. Every publish carries
`observedGeneration`, so a status written for an older generation reads as in progress.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import activitynames
    from plnt.sagas import values as v
    from plnt.sagas.deploying.workflow import timeline as tl
    from plnt.sagas.deploying.workflow.intents import Intent

REPORT_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=3),
    non_retryable_error_types=["ObjectGone"],
)


@dataclass(frozen=True)
class Event:
    """A core/v1 Event about the run."""

    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class Canary:
    """A canary revision that takes `weight` percent of invocations beside the stable one."""

    revision: int
    digest: str
    endpoints: list[str]
    weight: int
    shadow: dict[str, Any] | None = None
    """The shadow window (`{percent, queueSize, since}`) while live calls are mirrored."""


@dataclass(frozen=True)
class Outcome:
    """How a step ended: the timeline message, the attempts it took, whether it was a no-op."""

    message: str
    attempt: int = 1
    skipped: bool = False


class Reporter:
    """The saga's record of itself (timeline, conditions, phase, traffic) and its publisher."""

    def __init__(self, state: v.ControllerState) -> None:
        self.state = state
        self.timeline = tl.Timeline([tl.Step(**step_args(s)) for s in state.saga])
        self.conditions = tl.Conditions(dict(state.conditions))
        self.canary: Canary | None = None
        self.evaluation: dict[str, Any] | None = None
        """The last quality gate's record, written as `status.lastEvaluation` once set."""

    # -- publishing -----------------------------------------------------------------

    async def publish(self, intent: Intent, event: Event | None = None) -> None:
        """Write the status the saga owns (and `event`) through the `report` local activity."""
        await workflow.execute_local_activity(
            activitynames.REPORT,
            v.Report(
                run=self.state.run,
                status=self.status(intent),
                event_type=event.type if event else None,
                event_reason=event.reason if event else None,
                event_message=event.message if event else None,
            ),
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=REPORT_RETRY,
        )
        # Written once: the merge patch leaves it in place, and later reports (each one in
        # the workflow's history) need not carry every case's answers again.
        self.evaluation = None

    def set(self, kind: str, status: bool, reason: str, message: str, *, intent: Intent) -> None:
        """Set one condition as of now, for `intent`'s generation."""
        self.conditions.set(
            kind, status, reason, message, now=workflow.now(), generation=intent.generation
        )

    # -- the deploy's transitions ------------------------------------------------------

    def deploying(self, intent: Intent, names: list[str], revision: int, digest: str) -> None:
        """A deploy begins: a fresh timeline of `names`, and Progressing says which revision."""
        self.timeline = tl.Timeline.of(names)
        message = (
            f"deploying revision {revision} ({digest[:19]}) for generation {intent.generation}"
        )
        self.set("Progressing", True, "Deploying", message, intent=intent)
        self.reconciling(intent, "Deploying", message)

    # -- kstatus: Reconciling and Stalled ---------------------------------------------

    def reconciling(self, intent: Intent, reason: str, message: str) -> None:
        """The saga works on `intent`'s generation: Reconciling=True, no Stalled."""
        self.conditions.clear(tl.STALLED)
        self.set(tl.RECONCILING, True, reason, message, intent=intent)

    def stalled(self, intent: Intent, reason: str, message: str) -> None:
        """The saga stopped short of `intent`'s generation: Stalled=True, no Reconciling."""
        self.conditions.clear(tl.RECONCILING)
        self.set(tl.STALLED, True, reason, message, intent=intent)

    def reconciled(self) -> None:
        """The generation is what serves (or needs only a scale): neither condition."""
        self.conditions.clear(tl.RECONCILING)
        self.conditions.clear(tl.STALLED)

    # -- step transitions -----------------------------------------------------------

    async def begin(self, intent: Intent, name: str, phase: str, message: str) -> None:
        self.timeline.start(name, workflow.now(), message)
        self.state.phase = phase
        await self.publish(intent)

    def skip(self, name: str, message: str) -> None:
        """A step that has nothing to do this time: recorded, not published on its own."""
        self.timeline.finish(name, workflow.now(), "Skipped", message)

    async def end(self, intent: Intent, name: str, reason: str, outcome: Outcome) -> None:
        self.timeline.set_attempts(name, outcome.attempt)
        state = "Skipped" if outcome.skipped else "Succeeded"
        self.timeline.finish(name, workflow.now(), state, outcome.message)
        await self.publish(intent, Event("Normal", reason, outcome.message))

    async def promoted(self, intent: Intent, name: str, message: str) -> None:
        """The commit step ended: the new revision serves, and the conditions say so."""
        self.timeline.finish(name, workflow.now(), "Succeeded", message)
        self.set("Ready", True, "Promoted", message, intent=intent)
        self.set("Progressing", False, "DeployComplete", message, intent=intent)
        self.set("Degraded", False, "Healthy", "the last deploy succeeded", intent=intent)
        self.reconciled()
        self.state.phase = "Ready"
        await self.publish(intent, Event("Normal", "Promoted", message))

    async def withdraw_canary(self, intent: Intent) -> None:
        """Traffic back to the stable revision only (an undo)."""
        self.canary = None
        await self.publish(intent)

    # -- failure and compensation ---------------------------------------------------

    async def failed(
        self,
        intent: Intent,
        name: str,
        reason: str,
        message: str,
        *,
        attempts: int | None,
        announce: str,
    ) -> None:
        """Step `name` failed (or was interrupted: no `attempts`); compensation begins.

        The timeline keeps what the step said; the Warning Event says `announce` (the
        message with what happens next, such as when the saga tries again).
        """
        now = workflow.now()
        if attempts is not None:
            self.timeline.set_attempts(name, attempts)
        self.timeline.finish(name, now, "Failed", message)
        self.timeline.skip_pending(now, f"not run: {name} did not succeed")
        self.state.phase = "RollingBack"
        self.reconciling(intent, "RollingBack", announce)
        await self.publish(intent, Event("Warning", reason, announce))

    def compensating(self) -> None:
        self.timeline.start("rollback", workflow.now(), "removing the canary")

    def compensated(self, revision: int) -> None:
        self.timeline.finish(
            "rollback", workflow.now(), "Compensated", f"canary revision {revision} removed"
        )

    async def rolled_back(
        self, intent: Intent, reason: str, message: str, *, interrupted: bool, retrying: bool
    ) -> None:
        """After compensation: what still serves, and the conditions a human acts on.

        A failure the saga will retry by itself keeps `Reconciling=True` (Flux's convention:
        Stalled means only a change of spec or a person can move it on), so a GitOps tool
        waits out the retries up to its own timeout instead of giving up on the first
        unreachable registry or backend."""
        stable = self.state.stable
        if stable is not None:
            serving = f"revision {stable.revision} still serves"
            self.set("Ready", True, "RolledBack", f"{message}; {serving}", intent=intent)
            self.set("Degraded", not interrupted, reason, message, intent=intent)
            self.state.phase = "Ready" if interrupted else "Degraded"
        else:
            self.set("Ready", False, reason, message, intent=intent)
            self.state.phase = "Pending" if interrupted else "Failed"
        self.set("Progressing", False, reason, message, intent=intent)
        if retrying or (interrupted and reason == "Superseded"):
            self.reconciling(intent, reason, message)  # the retry or the newer generation is next
        else:
            self.stalled(intent, reason, message)  # a new generation, or a person
        event = "Normal" if interrupted else "Warning"
        await self.publish(intent, Event(event, "RolledBack", f"{message}; canary removed"))

    # -- rendering ------------------------------------------------------------------

    def status(self, intent: Intent) -> dict[str, Any]:
        """The status fields the saga owns, as one merge patch."""
        state, stable = self.state, self.state.stable
        status: dict[str, Any] = {
            "phase": state.phase,
            "observedGeneration": intent.generation,
            "conditions": self.conditions.to_json(),
            "saga": self.timeline.to_json(),
            "history": list(state.history),
            "traffic": self._traffic(),
            "replicas": stable.replicas if stable else 0,
            "readyReplicas": stable.ready_replicas if stable else 0,
            "selector": f"plnt.work/run={state.run.name}",
        }
        if self.evaluation is not None:
            status["lastEvaluation"] = self.evaluation
        if stable is not None:
            status.update(
                revision=stable.revision,
                digest=stable.digest,
                backend=stable.backend.name or stable.backend.type,
                endpoint=stable.endpoints[0] if stable.endpoints else None,
            )
        return status

    def _traffic(self) -> list[dict[str, Any]]:
        stable, canary = self.state.stable, self.canary
        if stable is None:
            return []
        traffic = [
            {
                "revision": stable.revision,
                "digest": stable.digest,
                "weight": 100 - (canary.weight if canary else 0),
                "endpoints": stable.endpoints,
            }
        ]
        if canary is not None:
            entry: dict[str, Any] = {
                "revision": canary.revision,
                "digest": canary.digest,
                "weight": canary.weight,
                "endpoints": canary.endpoints,
            }
            if canary.shadow is not None:
                entry["shadow"] = canary.shadow
            traffic.append(entry)
        return traffic

    def snapshot(self, pending: v.Desired | None) -> v.ControllerState:
        """The durable state to continue as new with."""
        state = self.state
        state.conditions = dict(self.conditions.items)
        state.saga = self.timeline.to_json()
        state.pending = pending
        return state


def step_args(step: dict[str, Any]) -> dict[str, Any]:
    """A `timeline.Step`'s arguments from its status JSON (as carried across continue-as-new)."""
    return {
        "name": step["name"],
        "state": step.get("state", "Pending"),
        "attempts": step.get("attempts", 0),
        "start_time": step.get("startTime"),
        "end_time": step.get("endTime"),
        "message": step.get("message", ""),
    }
