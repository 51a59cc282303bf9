"""Which Events a change to a WorkflowRun deserves: every state transition is an Event.

Pure functions from (old, new) to event descriptions; the caller records them.
"""

from __future__ import annotations

from dataclasses import dataclass

from plnt.registry.definitions import Object


@dataclass(frozen=True, slots=True)
class Transition:
    """One Event to record: Normal or Warning, a CamelCase reason, a human message."""

    type: str
    reason: str
    message: str


def _generation(obj: Object | None) -> int:
    return int((obj or {}).get("metadata", {}).get("generation") or 0)


def _phase(obj: Object | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def workflowrun_transitions(old: Object | None, new: Object) -> list[Transition]:
    """Accepted on create, SpecChanged on a generation bump, PhaseChanged on a new phase."""
    spec = new.get("spec") or {}
    workflow = spec.get("workflow") or {}
    if old is None:
        return [
            Transition(
                "Normal",
                "Accepted",
                f"generation 1 accepted: {workflow.get('ref')}@{workflow.get('digest')}",
            )
        ]
    out: list[Transition] = []
    if _generation(new) > _generation(old):
        out.append(Transition("Normal", "SpecChanged", f"generation {_generation(new)} accepted"))
    if _phase(new) != _phase(old) and _phase(new):
        kind = "Warning" if _phase(new) in ("Failed", "Degraded") else "Normal"
        out.append(
            Transition(kind, "PhaseChanged", f"phase {_phase(old) or '<none>'} → {_phase(new)}")
        )
    return out
