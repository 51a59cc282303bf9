"""Invocation's definition: names, the status subresource, printer columns, selectable
fields, and its grants in the standalone default policy.

`kubectl get invocations` shows the run, the revision that served the call, the phase, how
long it took (or has taken so far) and the tokens it used. `spec.workflowRun` and
`status.phase` are selectable fields, so `--field-selector spec.workflowRun=summarize` lists
one run's Invocations (the run's teardown deletes them that way). Viewers read
Invocations; invokers may also create and delete them (a create needs `workflowruns/invoke`
on the run too, asked at admission: `plnt.apiserver.invocations.admission`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from plnt.api.invocations import KIND, PLURAL, Invocation
from plnt.api.meta import parse_time
from plnt.api.workflowruns import GROUP, VERSION
from plnt.registry import tables
from plnt.registry.definitions import (
    INVOKERS,
    READ_VERBS,
    VIEWERS,
    Grant,
    PrinterColumn,
    ResourceDefinition,
    Subresource,
)
from plnt.registry.invocations import transitions
from plnt.registry.invocations.strategy import InvocationStrategy
from plnt.registry.objects import Object, lookup


def duration(obj: Object, *, now: datetime | None = None) -> str | None:
    """From the start to the completion (or to now while it runs), as kubectl prints ages."""
    started = lookup(obj, "status", "startTime")
    if not isinstance(started, str):
        return None
    finished = lookup(obj, "status", "completionTime")
    try:
        end = parse_time(finished) if isinstance(finished, str) else (now or datetime.now(UTC))
        return tables.human_duration((end - parse_time(started)).total_seconds())
    except ValueError:
        return None


DEFINITION = ResourceDefinition(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=PLURAL,
    singular="invocation",
    model=Invocation,
    strategy=InvocationStrategy(model=Invocation),
    short_names=("inv",),
    categories=("plnt",),
    description=(
        "One durable call of a WorkflowRun's workflow: it runs to completion whatever the"
        " client does, and its result is kept in status."
    ),
    subresources=(Subresource("status", KIND, ("get", "patch", "update")),),
    columns=(
        PrinterColumn(
            "Run", "string", "The WorkflowRun called.", lambda o: lookup(o, "spec", "workflowRun")
        ),
        PrinterColumn(
            "Revision",
            "integer",
            "The revision that serves the call.",
            lambda o: lookup(o, "status", "revision"),
        ),
        PrinterColumn(
            "Phase", "string", "Lifecycle phase.", lambda o: lookup(o, "status", "phase")
        ),
        PrinterColumn("Duration", "string", "From the start to the completion (or now).", duration),
        PrinterColumn(
            "Tokens",
            "integer",
            "Tokens the backend counted.",
            lambda o: lookup(o, "status", "usage", "totalTokens"),
        ),
        PrinterColumn("Age", "string", "Time since creation.", tables.age),
        PrinterColumn(
            "Reason",
            "string",
            "Why it failed.",
            lambda o: lookup(o, "status", "error", "reason"),
            priority=1,
        ),
        PrinterColumn(
            "Attempts",
            "integer",
            "Calls made to a runner.",
            lambda o: lookup(o, "status", "attempts"),
            priority=1,
        ),
    ),
    field_labels=lambda obj: {
        "spec.workflowRun": str(lookup(obj, "spec", "workflowRun") or ""),
        "status.phase": str(lookup(obj, "status", "phase") or ""),
    },
    grants=(
        # Viewers follow Invocations as they read runs.
        Grant(VIEWERS, READ_VERBS, ("", "status")),
        # Invokers start, follow and delete them; creating one also needs create on
        # workflowruns/invoke for its run, which admission checks.
        Grant(INVOKERS, (*READ_VERBS, "create", "delete"), ("",)),
    ),
    transitions=transitions.invocation_transitions,
)
