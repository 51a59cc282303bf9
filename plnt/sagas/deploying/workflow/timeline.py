"""The saga's record of itself: the step timeline, the conditions and the phase.

Pure code with no I/O and no clock of its own (the workflow passes `workflow.now()`),
so it runs inside Temporal's deterministic sandbox and in plain unit tests alike.
`status()` renders the fields of `WorkflowRun.status` the saga owns, which the report
activity writes as one merge patch.

Besides Ready, Progressing and Degraded, the conditions carry kstatus's two
"abnormal-true" conditions, `Reconciling` and `Stalled` (see `docs/gitops.md`): they
are present only while true, so a run that reached its generation shows neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from plnt.api.meta import format_time

STEP_STATES = ("Pending", "Running", "Succeeded", "Failed", "Compensated", "Skipped")


@dataclass
class Step:
    """One saga step as `status.saga` shows it."""

    name: str
    state: str = "Pending"
    attempts: int = 0
    start_time: str | None = None
    end_time: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "state": self.state, "attempts": self.attempts}
        if self.start_time:
            out["startTime"] = self.start_time
        if self.end_time:
            out["endTime"] = self.end_time
        out["message"] = self.message
        return out


@dataclass
class Timeline:
    """The steps of the current (or last) saga, in order."""

    steps: list[Step] = field(default_factory=list)

    @classmethod
    def of(cls, names: list[str]) -> Timeline:
        return cls([Step(name) for name in names])

    def step(self, name: str) -> Step:
        for candidate in self.steps:
            if candidate.name == name:
                return candidate
        added = Step(name)
        self.steps.append(added)
        return added

    def start(self, name: str, now: datetime, message: str = "") -> None:
        step = self.step(name)
        step.state, step.start_time, step.end_time = "Running", format_time(now), None
        step.attempts += 1
        step.message = message

    def finish(self, name: str, now: datetime, state: str, message: str = "") -> None:
        step = self.step(name)
        step.state, step.end_time = state, format_time(now)
        if step.start_time is None:
            step.start_time = step.end_time
        step.message = message

    def set_attempts(self, name: str, attempts: int) -> None:
        step = self.step(name)
        step.attempts = max(step.attempts, attempts)

    def skip_pending(self, now: datetime, message: str) -> None:
        for step in self.steps:
            if step.state == "Pending":
                self.finish(step.name, now, "Skipped", message)

    def to_json(self) -> list[dict[str, Any]]:
        return [step.to_json() for step in self.steps]


RECONCILING = "Reconciling"
"""kstatus: the saga is working on the generation the condition names (InProgress)."""

STALLED = "Stalled"
"""kstatus: the saga cannot reach the generation without help or a later retry (Failed)."""

ORDER = ("Ready", "Progressing", "Degraded", RECONCILING, STALLED)


@dataclass
class Conditions:
    """Ready, Progressing, Degraded, and Reconciling and Stalled while they are true.

    A transition time changes only with the status.
    """

    items: dict[str, dict[str, Any]] = field(default_factory=dict)

    def set(
        self,
        kind: str,
        status: bool,
        reason: str,
        message: str,
        *,
        now: datetime,
        generation: int,
    ) -> None:
        value = "True" if status else "False"
        previous = self.items.get(kind)
        since = (
            previous["lastTransitionTime"]
            if previous is not None and previous["status"] == value
            else format_time(now)
        )
        self.items[kind] = {
            "type": kind,
            "status": value,
            "observedGeneration": generation,
            "lastTransitionTime": since,
            "reason": reason,
            "message": message,
        }

    def get(self, kind: str) -> dict[str, Any] | None:
        return self.items.get(kind)

    def clear(self, kind: str) -> None:
        """Drop `kind`: for Reconciling and Stalled, absence is how "False" is said."""
        self.items.pop(kind, None)

    def observe(self, generation: int) -> None:
        """Mark every condition as current for `generation` (nothing else about it changed)."""
        for item in self.items.values():
            item["observedGeneration"] = generation

    def to_json(self) -> list[dict[str, Any]]:
        return [self.items[kind] for kind in ORDER if kind in self.items]
