"""Which Events a change to a WorkflowRun deserves: every state transition is an Event.

Pure rules from a stored `Change` to `Transition`s; the Event recorder applies them,
after the answer, to every change `ResourceStore.after_write` hands it, so a transition
reads the same whether POST, PUT, PATCH, apply, `/scale`, `/rollback` or DELETE made it.
In the order they are recorded:

* `Accepted` on create;
* `RollbackRequested` when the write is a rollback (its rollback-generation annotation
  names the generation it produced, the rule the saga reads it by too);
* `SpecChanged` on a generation bump;
* `PhaseChanged` on a new `status.phase` (Warning for Failed and Degraded);
* `DeletionRequested` when deletion starts and finalizers hold the run;
* `Deleted` when the run leaves storage.
"""

from __future__ import annotations

from plnt.api.workflowruns import ROLLBACK_GENERATION_ANNOTATION, ROLLBACK_TO_ANNOTATION
from plnt.registry.changes import Change, Transition, generation
from plnt.registry.objects import Object, lookup


def _phase(obj: Object | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def _rollback_to(change: Change) -> str | None:
    """The revision a rollback asked for, when this write is that rollback."""
    annotations = lookup(change.after, "metadata", "annotations") or {}
    produced = annotations.get(ROLLBACK_GENERATION_ANNOTATION)
    if not change.generation_changed or produced != str(generation(change.after)):
        return None
    revision = annotations.get(ROLLBACK_TO_ANNOTATION)
    return str(revision) if revision else None


def workflowrun_transitions(change: Change) -> list[Transition]:
    """The Events of one stored change of a WorkflowRun (see the module docstring)."""
    new = change.after
    if change.created:
        workflow = lookup(new, "spec", "workflow") or {}
        return [
            Transition(
                "Normal",
                "Accepted",
                f"generation 1 accepted: {workflow.get('ref')}@{workflow.get('digest')}",
            )
        ]
    old = change.before
    out: list[Transition] = []
    rollback_to = _rollback_to(change)
    if rollback_to is not None:
        out.append(
            Transition(
                "Normal", "RollbackRequested", f"rollback to revision {rollback_to} requested"
            )
        )
    if generation(new) > generation(old):
        out.append(Transition("Normal", "SpecChanged", f"generation {generation(new)} accepted"))
    if _phase(new) != _phase(old) and _phase(new):
        kind = "Warning" if _phase(new) in ("Failed", "Degraded") else "Normal"
        out.append(
            Transition(kind, "PhaseChanged", f"phase {_phase(old) or '<none>'} → {_phase(new)}")
        )
    if change.deletion_started:
        finalizers = ", ".join(lookup(new, "metadata", "finalizers") or [])
        out.append(
            Transition(
                "Normal", "DeletionRequested", f"deletion requested; waiting for {finalizers}"
            )
        )
    if change.gone:
        out.append(Transition("Normal", "Deleted", f"generation {generation(new)} deleted"))
    return out
