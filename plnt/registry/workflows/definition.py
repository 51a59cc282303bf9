"""Workflow's definition: read-only verbs, printer columns, and its grants.

`kubectl get workflows` prints the name, the newest valid version, every version, the
newest valid version's digest (short, as image tools print one) and the age. Only get,
list and watch are served: discovery and OpenAPI list no other verb, and any other is
kube's 405 MethodNotAllowed. Viewers and invokers read the catalog.
"""

from __future__ import annotations

from plnt.api.workflowruns import GROUP, VERSION
from plnt.api.workflows import KIND, PLURAL, Workflow, latest, short_digest
from plnt.registry.definitions import (
    INVOKERS,
    READ_VERBS,
    VIEWERS,
    Grant,
    PrinterColumn,
    ResourceDefinition,
)
from plnt.registry.objects import Object, lookup
from plnt.registry.strategy import Strategy

MAX_LISTED_VERSIONS = 5
"""The VERSIONS column names this many, then says how many more there are."""


def versions_cell(obj: Object) -> str | None:
    """The distinct versions, newest first: `1.1.0,1.0.0` (`…+3` past five)."""
    names: list[str] = []
    for version in lookup(obj, "spec", "versions") or []:
        label = version.get("version") if isinstance(version, dict) else None
        if isinstance(label, str) and label not in names:
            names.append(label)
    if not names:
        return None
    shown = ",".join(names[:MAX_LISTED_VERSIONS])
    more = len(names) - MAX_LISTED_VERSIONS
    return f"{shown},+{more}" if more > 0 else shown


def digest_cell(obj: Object) -> str | None:
    newest = latest(obj)
    return short_digest(newest.get("digest")) if newest else None


DEFINITION = ResourceDefinition(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=PLURAL,
    singular="workflow",
    model=Workflow,
    strategy=Strategy(model=Workflow),
    categories=("plnt",),
    verbs=READ_VERBS,
    description=(
        "A workflow of the catalog: the versions of one spec found in the sources the"
        " server is configured with, each pinned to its digest. Read-only."
    ),
    columns=(
        PrinterColumn(
            "Latest",
            "string",
            "The newest valid version.",
            lambda o: lookup(o, "spec", "latestVersion"),
        ),
        PrinterColumn("Versions", "string", "Every version found, newest first.", versions_cell),
        PrinterColumn("Digest", "string", "The newest valid version's digest.", digest_cell),
        PrinterColumn(
            "Sources",
            "string",
            "The sources it was found in.",
            lambda o: (
                ",".join(
                    sorted({str(v.get("source")) for v in lookup(o, "spec", "versions") or []})
                )
                or None
            ),
            priority=1,
        ),
    ),
    grants=(
        Grant(VIEWERS, READ_VERBS, ("",)),
        Grant(INVOKERS, READ_VERBS, ("",)),
    ),
)
