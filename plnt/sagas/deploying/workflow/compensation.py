"""The compensation stack of one deploy: undos registered before their steps, run in reverse.

The Temporal saga idiom: a step pushes its undo *before* it runs, so a failure or a
cancellation half-way through the step still undoes whatever it did (every undo
accepts "nothing to undo": retiring a revision that never started is a no-op). The
commit point clears the stack; from there on nothing is undone. Workflow code: no
I/O; the undos themselves run activities.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Undo = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class Compensation:
    """One registered undo and what it undoes (for the timeline and for tests)."""

    what: str
    undo: Undo


class CompensationStack:
    """Undos of the steps that ran (or began), newest last."""

    def __init__(self) -> None:
        self._undos: list[Compensation] = []

    def push(self, compensation: Compensation) -> None:
        self._undos.append(compensation)

    def commit(self) -> None:
        """The commit point: what ran stays; nothing is undone any more."""
        self._undos.clear()

    def __bool__(self) -> bool:
        return bool(self._undos)

    def registered(self) -> list[str]:
        return [compensation.what for compensation in self._undos]

    async def unwind(self) -> None:
        """Run every undo, newest first; each leaves the stack before it runs.

        The caller keeps cancellation away while this runs (the controller does not
        interrupt a deploy that is compensating), so every undo runs to completion.
        """
        while self._undos:
            await self._undos.pop().undo()
