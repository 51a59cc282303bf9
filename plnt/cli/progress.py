"""Following a deploy: when it is over, and how to show its saga steps as they change.

`outcome` decides from one WorkflowRun whether the deploy of a generation has
finished and how. The saga reports `status.observedGeneration` with every
status write, so a status for an older generation never ends the wait. Two
displays render the saga timeline: `LiveDisplay` redraws a compact table in
place on a terminal; `LineDisplay` prints one line per change, for logs and
pipes. Both share `step_line`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from plnt.cli import printing

SYMBOLS = {
    "Pending": "○",
    "Running": "●",
    "Succeeded": "✓",
    "Failed": "✗",
    "Compensated": "↺",
    "Skipped": "-",
}


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a deploy ended: promoted or not, and the message to show."""

    succeeded: bool
    message: str


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {c.get("type", ""): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}


def outcome(run: Mapping[str, Any], generation: int) -> Outcome | None:
    """The outcome of deploying `generation`, or None while it is still in progress."""
    status = run.get("status") or {}
    if int(status.get("observedGeneration") or 0) < generation:
        return None
    phase = status.get("phase")
    conditions = _conditions(status)
    ready = conditions.get("Ready") or {}
    degraded = conditions.get("Degraded") or {}
    progressing = conditions.get("Progressing") or {}
    if phase == "Ready":
        if ready.get("reason") == "RolledBack":
            return Outcome(False, str(ready.get("message") or "the deploy was rolled back"))
        revision = status.get("revision")
        digest = printing.short_digest(status.get("digest"))
        detail = f"revision {revision} ({digest})" if revision is not None else "ready"
        return Outcome(True, str(ready.get("message") or detail))
    if phase in ("Failed", "Degraded"):
        message = (
            degraded.get("message") if degraded.get("status") == "True" else None
        ) or ready.get("message")
        return Outcome(False, str(message or f"phase {phase}"))
    if phase == "Pending" and progressing.get("status") == "False":
        return Outcome(False, str(progressing.get("message") or "the deploy did not complete"))
    return None


def step_line(step: Mapping[str, Any]) -> str:
    """`✓ pull  Succeeded  attempt 1  2s  message` for one saga step."""
    state = str(step.get("state") or "Pending")
    parts = [SYMBOLS.get(state, "?"), str(step.get("name") or "?"), state]
    attempts = int(step.get("attempts") or 0)
    if attempts:
        parts.append(f"attempt {attempts}")
    duration = printing.step_duration(step.get("startTime"), step.get("endTime"))
    if duration:
        parts.append(duration)
    if step.get("message"):
        parts.append(str(step["message"]))
    return "  ".join(parts)


class Display(Protocol):
    """Shows a WorkflowRun's saga as it changes."""

    def update(self, run: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


class LineDisplay:
    """One plain line per change of the phase or of a step's state, attempts or message."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._seen: dict[str, tuple[Any, ...]] = {}
        self._phase: str | None = None

    def update(self, run: Mapping[str, Any]) -> None:
        status = run.get("status") or {}
        phase = status.get("phase")
        if phase and phase != self._phase:
            self._phase = phase
            self._console.print(f"phase: {phase}", markup=False, highlight=False, soft_wrap=True)
        for step in status.get("saga") or []:
            key = (step.get("state"), step.get("attempts"), step.get("message"))
            name = str(step.get("name"))
            if self._seen.get(name) != key:
                self._seen[name] = key
                self._console.print(
                    f"  {step_line(step)}", markup=False, highlight=False, soft_wrap=True
                )

    def close(self) -> None:
        return None


class LiveDisplay:
    """A compact table of the saga's steps, redrawn in place on a terminal."""

    def __init__(self, console: Console, name: str) -> None:
        self._name = name
        self._live = Live(self._render({}), console=console, auto_refresh=True)
        self._live.start()
        self._run: Mapping[str, Any] = {}

    def _render(self, run: Mapping[str, Any]) -> Table:
        status = run.get("status") or {}
        title = escape(f"workflowrun/{self._name}  phase: {status.get('phase') or 'Pending'}")
        table = Table(title=title, title_justify="left", box=None, show_header=False)
        for _ in range(5):
            table.add_column()
        for step in status.get("saga") or []:
            state = str(step.get("state") or "Pending")
            attempts = int(step.get("attempts") or 0)
            table.add_row(
                SYMBOLS.get(state, "?"),
                escape(str(step.get("name") or "?")),
                state,
                f"attempt {attempts}" if attempts > 1 else "",
                printing.step_duration(step.get("startTime"), step.get("endTime")),
            )
            if step.get("message"):
                table.add_row("", "", f"[dim]{escape(str(step['message']))}[/dim]", "", "")
        return table

    def update(self, run: Mapping[str, Any]) -> None:
        self._run = run
        self._live.update(self._render(run), refresh=True)

    def close(self) -> None:
        self._live.update(self._render(self._run), refresh=True)
        self._live.stop()


def display_for(console: Console, name: str) -> Display:
    """A live table on a terminal, plain lines otherwise."""
    if console.is_terminal:
        return LiveDisplay(console, name)
    return LineDisplay(console)
