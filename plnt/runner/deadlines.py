"""A call's deadline and criticality, carried through an invocation without threading them
through every signature.

The runner learns both from the request (`X-Plnt-Timeout-Ms`, `X-Plnt-Criticality`:
`plnt.api.headers`) and sets them for the invocation (`CallContext`, in a context variable);
every task the executor starts for a step copies the context, so a step, a tool loop's
turns and the guarded backend call all see the same deadline without each layer passing it
on. Nothing here does I/O.

A deadline is a moment on the monotonic clock, never a wall-clock time: each hop receives
the time left, as a duration, and keeps its own moment, so hosts need not agree on the time.

Exceptions: `DeadlineExceeded` (in `plnt.runner.errors`) names the hop that ran out.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from plnt.api.headers import Criticality
from plnt.runner import errors

Clock = Callable[[], float]


@dataclass(frozen=True)
class Deadline:
    """The moment (on `clock`) a call must be answered by; `None` moment: no deadline."""

    at: float | None
    clock: Clock = field(default=time.monotonic, compare=False)

    @classmethod
    def after(cls, seconds: float | None, *, clock: Clock = time.monotonic) -> Deadline:
        """A deadline `seconds` from now (None: none)."""
        return cls(None if seconds is None else clock() + seconds, clock)

    def remaining(self) -> float | None:
        """Seconds left (never below 0), None when there is no deadline."""
        if self.at is None:
            return None
        return max(self.at - self.clock(), 0.0)

    def expired(self) -> bool:
        """Whether the time is up."""
        left = self.remaining()
        return left is not None and left <= 0.0

    def check(self, hop: str) -> None:
        """Raise `DeadlineExceeded` naming `hop` when the time is up: work is not started
        for a caller who has already given up."""
        if self.expired():
            raise errors.DeadlineExceeded(hop, "the call's deadline passed before it started")

    def bound(self, seconds: float) -> float:
        """`seconds`, or the time left when that is shorter."""
        left = self.remaining()
        return seconds if left is None else min(seconds, left)

    def header_ms(self) -> str | None:
        """The time left as `X-Plnt-Timeout-Ms` carries it (None: no deadline)."""
        left = self.remaining()
        return None if left is None else f"{left * 1000.0:.0f}"


NO_DEADLINE = Deadline(None)


@dataclass(frozen=True)
class CallContext:
    """What the invocation under way asked for: its deadline and its criticality."""

    deadline: Deadline = NO_DEADLINE
    criticality: Criticality = Criticality.STANDARD


_DEFAULT = CallContext()
_CURRENT: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "plnt_runner_call", default=None
)


def current() -> CallContext:
    """The invocation's context (a default one, with no deadline, outside any)."""
    context = _CURRENT.get()
    return _DEFAULT if context is None else context


def enter(context: CallContext) -> contextvars.Token[CallContext | None]:
    """Make `context` current for this task and the tasks it starts; `leave` undoes it."""
    return _CURRENT.set(context)


def leave(token: contextvars.Token[CallContext | None]) -> None:
    """Restore the context `enter` replaced."""
    _CURRENT.reset(token)
