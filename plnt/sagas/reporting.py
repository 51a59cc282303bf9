"""What the deploy saga knows and how it says it: `ControllerState` and status reports.

`SagaBase` holds the workflow's in-memory state (the durable part is `ControllerState`,
carried across continue-as-new) and renders the fields of `WorkflowRun.status` the saga
owns. Every transition goes out through `report`, a local activity that writes status
and an Event through the API server. Workflow code: no I/O, no clock but
`workflow.now()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import timeline as tl
    from plnt.sagas import values as v

PHASES = {
    "pull": "Pulling",
    "resolve": "Resolving",
    "install": "Deploying",
    "smoke": "SmokeTesting",
    "analyze": "SmokeTesting",
    "promote": "Promoting",
}


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
    retries: int = 0


class SagaBase:
    """The workflow's state and its status reports."""

    def __init__(self) -> None:
        self.state: ControllerState | None = None
        self.desired: v.Desired | None = None
        self.in_flight: v.Desired | None = None
        self.interrupt: str | None = None
        self.committing = False
        self.canary: tuple[int, str, list[str], int] | None = None
        self.pausing = False  # the canary holds its weight until the pause ends
        self.skip_pause = False  # `promote` asked to end the pause now
        self.timeline = tl.Timeline()
        self.conditions = tl.Conditions()

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


def step_args(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": step["name"],
        "state": step.get("state", "Pending"),
        "attempts": step.get("attempts", 0),
        "start_time": step.get("startTime"),
        "end_time": step.get("endTime"),
        "message": step.get("message", ""),
    }
