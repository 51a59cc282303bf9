"""Which Events a change to an Invocation deserves: its start, each retry, and its end.

Pure rules from a stored `Change` to `Transition`s (`ResourceStore.after_write` records
them), so the Events read the same whichever writer moved the phase:

* `Started` when the phase becomes Running (the revision and the replica called);
* `Retrying` (Warning) when `status.attempts` grows past 1: a runner replica was lost and
  the call goes on on another one (the status message says why);
* `Succeeded`, or `Failed` / `Cancelled` (Warning), when it finishes, with the duration,
  the tokens or the reason.
"""

from __future__ import annotations

from plnt.registry.changes import Change, Transition
from plnt.registry.objects import Object, lookup


def _status(obj: Object | None) -> dict[str, object]:
    status = (obj or {}).get("status")
    return status if isinstance(status, dict) else {}


def _summary(obj: Object) -> str:
    """`revision 2, 1.2 s, 345 tokens`: what a finished call took."""
    status = _status(obj)
    parts = []
    if status.get("revision") is not None:
        parts.append(f"revision {status['revision']}")
    tokens = lookup(obj, "status", "usage", "totalTokens")
    if tokens is not None:
        parts.append(f"{tokens} tokens")
    attempts = status.get("attempts")
    if isinstance(attempts, int) and attempts > 1:
        parts.append(f"{attempts} attempts")
    return ", ".join(parts)


def invocation_transitions(change: Change) -> list[Transition]:
    """The Events of one stored change of an Invocation (see the module docstring)."""
    if change.created or change.gone:
        return []
    old, new = _status(change.before), _status(change.after)
    out: list[Transition] = []
    old_attempts, new_attempts = old.get("attempts") or 0, new.get("attempts") or 0
    if (
        isinstance(new_attempts, int)
        and isinstance(old_attempts, int)
        and new_attempts > max(old_attempts, 1)
    ):
        out.append(
            Transition(
                "Warning",
                "Retrying",
                f"attempt {new_attempts}: {new.get('message') or 'calling again'}",
            )
        )
    phase = new.get("phase")
    if phase == old.get("phase"):
        return out
    if phase == "Running":
        where = f" at {new['endpoint']}" if new.get("endpoint") else ""
        out.append(
            Transition("Normal", "Started", f"calling revision {new.get('revision')}{where}")
        )
    elif phase == "Succeeded":
        out.append(Transition("Normal", "Succeeded", f"succeeded ({_summary(change.after)})"))
    elif phase in ("Failed", "Cancelled"):
        error = new.get("error")
        reason = error.get("reason") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        text = f"{str(phase).lower()}: {reason or phase}"
        if message:
            text += f": {message}"
        out.append(Transition("Warning", str(phase), text))
    return out
