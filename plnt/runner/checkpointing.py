"""Progress inside a step, for a durable invocation: reported as it happens, taken back on
resume.

A `Checkpoint` is one invocation's: what an earlier attempt of it handed back (steps that
were skipped, `forEach` elements that answered, tool loops' state: `plnt.api.checkpoints`)
and where new progress goes (`on_progress`, the stream's `progress` lines; nothing when the
caller did not ask for step outputs). The executor asks it before an element or a loop
runs and tells it when one answered; the tool loop (`plnt.runner.agents`) reports its
state through `reporter`. Which element a loop belongs to travels in a context variable
(`SCOPE`), set by the map in the element's own task, so the executor's signatures stay as
they are.

What was handed back is used once per step: a step retried inside this invocation starts
afresh. No I/O here.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

from plnt.api import checkpoints, traces
from plnt.api.invocations import InvokeRequest

ProgressListener = Callable[[dict[str, Any]], None]
LoopReporter = Callable[[checkpoints.LoopState], None]

SCOPE: contextvars.ContextVar[str] = contextvars.ContextVar(
    "plnt_loop_scope", default=checkpoints.PLAIN_SCOPE
)
"""The `forEach` element a tool loop runs for (its index as text), or the plain scope."""


class Checkpoint:
    """One invocation's progress inside steps (see the module docstring)."""

    def __init__(
        self,
        *,
        skipped: Mapping[str, str] | None = None,
        progress: Mapping[str, checkpoints.StepProgress] | None = None,
        on_progress: ProgressListener | None = None,
    ) -> None:
        self._skipped = dict(skipped or {})
        self._progress: dict[str, checkpoints.StepProgress] = {
            step: checkpoints.StepProgress(**done) for step, done in (progress or {}).items()
        }
        self._on_progress = on_progress

    @classmethod
    def of(cls, envelope: InvokeRequest, *, on_progress: ProgressListener | None) -> Checkpoint:
        """The checkpoint of an invoke envelope (`completedSteps`' `skipped`, `stepProgress`)."""
        skipped = {
            step: done.skipped
            for step, done in (envelope.completed_steps or {}).items()
            if done.skipped is not None
        }
        progress: dict[str, checkpoints.StepProgress] = {
            step: done  # type: ignore[misc]
            for step, done in (envelope.step_progress or {}).items()
            if isinstance(done, dict)
        }
        return cls(skipped=skipped, progress=progress, on_progress=on_progress)

    def steps(self) -> set[str]:
        """The steps named, for the executor's check that they exist."""
        return set(self._progress) | set(self._skipped)

    def skipped(self, step: str) -> str | None:
        """Why a completed step was skipped, when it was."""
        return self._skipped.get(step)

    # -- forEach -------------------------------------------------------------------------

    def item(self, step: str, index: int) -> tuple[bool, Any]:
        """(True, result) when an earlier attempt finished the element."""
        items = self._progress.get(step, checkpoints.StepProgress()).get("items") or {}
        key = str(index)
        return (True, items[key]) if key in items else (False, None)

    def failed_items(self, step: str) -> list[traces.FailedItem]:
        """The elements of a `continueOnError` map that failed in an earlier attempt."""
        done = self._progress.get(step, checkpoints.StepProgress())
        return list(done.get("failedItems") or [])

    def item_done(self, step: str, index: int, output: Any) -> None:
        if self._on_progress is not None:
            self._on_progress(checkpoints.item_line(step, index, output))

    def item_failed(self, step: str, failed: traces.FailedItem) -> None:
        if self._on_progress is not None:
            self._on_progress(checkpoints.failed_item_line(step, failed))

    # -- tool loops ------------------------------------------------------------------------

    def loop(self, step: str) -> checkpoints.LoopState | None:
        """The state an earlier attempt left the loop of `step` in, for this task's scope;
        handed out once."""
        loops = self._progress.get(step, checkpoints.StepProgress()).get("loops") or {}
        return loops.pop(SCOPE.get(), None)

    def reporter(self, step: str) -> LoopReporter | None:
        """Where the loop of `step` (in this task's scope) reports its state; None when
        nobody listens."""
        listener = self._on_progress
        if listener is None:
            return None
        scope = SCOPE.get()

        def report(state: checkpoints.LoopState) -> None:
            listener(checkpoints.loop_line(step, scope, state))

        return report


NONE = Checkpoint()
"""No progress handed back, none reported: a plain invocation."""
