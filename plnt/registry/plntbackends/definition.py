"""PlntBackend's definition: names, the status subresource and printer columns.

PlntBackend changes record no Events (no transition rules): probes rewrite its status
often, and what a run did with a backend is told by the run's own Events.
"""

from __future__ import annotations

from plnt.api import names
from plnt.api.backends import KIND, PlntBackend
from plnt.api.workflowruns import GROUP, VERSION
from plnt.registry.definitions import (
    READ_VERBS,
    VIEWERS,
    Grant,
    PrinterColumn,
    ResourceDefinition,
    Subresource,
)
from plnt.registry.objects import lookup
from plnt.registry.plntbackends.strategy import PlntBackendStrategy


def _milliseconds(value: object) -> str | None:
    return f"{value}ms" if isinstance(value, int) else None


DEFINITION = ResourceDefinition(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=names.BACKENDS,
    singular="plntbackend",
    model=PlntBackend,
    strategy=PlntBackendStrategy(model=PlntBackend),
    short_names=("pb",),
    categories=("plnt",),
    description="An inference backend registered once and referenced by many runs.",
    subresources=(Subresource("status", KIND, ("get", "patch", "update")),),
    grants=(Grant(VIEWERS, READ_VERBS, ("", "status")),),
    columns=(
        PrinterColumn("Type", "string", "Backend protocol.", lambda o: lookup(o, "spec", "type")),
        PrinterColumn("Endpoint", "string", "Base URL.", lambda o: lookup(o, "spec", "endpoint")),
        PrinterColumn(
            "Reachable",
            "string",
            "Result of the last probe.",
            lambda o: (
                None
                if lookup(o, "status", "reachable") is None
                else str(lookup(o, "status", "reachable")).lower()
            ),
        ),
        PrinterColumn(
            "In-Flight",
            "integer",
            "Requests running, as last probed.",
            lambda o: lookup(o, "status", "inFlight"),
            priority=1,
        ),
        PrinterColumn(
            "Queue",
            "integer",
            "Requests waiting, as last probed.",
            lambda o: lookup(o, "status", "queueDepth"),
            priority=1,
        ),
        PrinterColumn(
            "Latency",
            "string",
            "Latency of the last reachability probe.",
            lambda o: _milliseconds(lookup(o, "status", "latencyMilliseconds")),
            priority=1,
        ),
        PrinterColumn(
            "GPU-Headroom",
            "integer",
            "GPUs with room, as last probed (see docs/sagas.md).",
            lambda o: lookup(o, "status", "gpuHeadroom"),
            priority=1,
        ),
        PrinterColumn(
            "GPU", "string", "GPU class.", lambda o: lookup(o, "spec", "gpuClass"), priority=1
        ),
        PrinterColumn(
            "Models",
            "string",
            "Served models.",
            lambda o: ",".join(lookup(o, "spec", "models") or []) or None,
            priority=1,
        ),
        PrinterColumn(
            "TTFT",
            "string",
            "Time to first token of the last probe's small streamed call.",
            lambda o: _milliseconds(lookup(o, "status", "timeToFirstTokenMilliseconds")),
            priority=1,
        ),
    ),
)
