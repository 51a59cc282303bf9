"""Which revision an Invocation's call goes to, and where its ready replicas listen.

Pure functions of a WorkflowRun as the API answers it (its `status.revision`,
`status.traffic` and `status.history`, written by the deploy saga), used by the
invocation workflow's activities (`invoking`). No I/O here; a selector that names no
serving revision is the `invocation.fail` that says why.
"""

from __future__ import annotations

from typing import Any

from plnt.sagas.invoking import workflow as inv


def traffic(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's `status.traffic` entries (revisions taking invocations)."""
    entries = (run.get("status") or {}).get("traffic") or []
    return [e for e in entries if isinstance(e, dict)]


def traffic_entry(run: dict[str, Any], revision: int) -> dict[str, Any] | None:
    """The `status.traffic` entry of `revision`, if it takes traffic."""
    return next((e for e in traffic(run) if e.get("revision") == revision), None)


def endpoints_of(run: dict[str, Any], revision: int) -> list[str]:
    """Base URLs of the revision's ready replicas (the saga's `status.traffic`)."""
    entry = traffic_entry(run, revision) or {}
    return [str(e).rstrip("/") for e in entry.get("endpoints") or [] if e]


def pin(run: dict[str, Any], selector: str) -> inv.Pinned:
    """The revision `selector` names in the run's status, or the `invocation.fail` saying why
    none is (module `invocation`: what each selector means)."""
    name = run["metadata"]["name"]
    status = run.get("status") or {}
    stable = status.get("revision")
    if selector == "stable":
        if not isinstance(stable, int):
            phase = status.get("phase") or "Pending"
            raise inv.fail(
                inv.Reason.NOT_READY,
                f"workflowrun {name} has no promoted revision yet (phase {phase})",
            )
        revision = stable
    elif selector == "canary":
        canary = next(
            (
                e
                for e in traffic(run)
                if e.get("revision") != stable and int(e.get("weight") or 0) > 0
            ),
            None,
        )
        if canary is None:
            raise inv.fail(inv.Reason.NO_CANARY, f"workflowrun {name} has no canary taking traffic")
        revision = int(canary["revision"])
    else:
        revision = int(selector)
        if traffic_entry(run, revision) is None:
            known = sorted(
                {int(r["revision"]) for r in status.get("history") or [] if isinstance(r, dict)}
                | {int(e["revision"]) for e in traffic(run)}
            )
            if revision in known:
                raise inv.fail(
                    inv.Reason.REVISION_NOT_SERVING,
                    f"revision {revision} of workflowrun {name} no longer serves",
                )
            shown = ", ".join(str(r) for r in known) or "none yet"
            raise inv.fail(
                inv.Reason.REVISION_NOT_FOUND,
                f"workflowrun {name} has no revision {revision} (revisions: {shown})",
            )
    entry = traffic_entry(run, revision) or {}
    endpoints = endpoints_of(run, revision)
    if not endpoints:
        raise inv.fail(
            inv.Reason.NOT_READY, f"revision {revision} of workflowrun {name} has no ready replica"
        )
    return inv.Pinned(revision=revision, digest=str(entry.get("digest") or ""), endpoints=endpoints)
