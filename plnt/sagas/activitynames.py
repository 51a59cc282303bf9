"""The names of the deploy saga's activities: one spelling for every side that uses them.

The workflow schedules activities by these names (`steps`, `deploy`, `scaling`,
`reporting`), the worker serves them under the same names (`activities`), the metrics
count by them and tests that script activities register them. Recorded histories carry
them, so a name is never changed: a new spelling is a new activity. The bench workflow's
two activities are named in `bench` (`MEASURE_ACTIVITY`, `REPORT_ACTIVITY`).

No I/O here.
"""

from __future__ import annotations

REPORT = "report"
"""Write the status the saga owns, and an Event (a local activity)."""
PULL_SPEC = "pull-spec"
RESOLVE_BACKEND = "resolve-backend"
INSTALL = "install"
SCALE = "scale"
SMOKE = "smoke"
ANALYZE = "analyze"
EVALUATE = "evaluate"
"""The quality gate: the evaluation's cases on canary and stable, scored."""
RETIRE = "retire"
TEARDOWN = "teardown"
RELEASE = "release"
ROUTE = "route"
"""Set the weights of the run's HTTPRoute (Gateway API), or remove it."""

PULL_POSITIONAL = "pull"
"""`pull-spec` as sagas that began before typed activity inputs schedule it."""
RESOLVE_POSITIONAL = "resolve"
"""`resolve-backend` as sagas that began before typed activity inputs schedule it."""

DEPLOY = (
    REPORT,
    PULL_SPEC,
    RESOLVE_BACKEND,
    INSTALL,
    SCALE,
    SMOKE,
    ANALYZE,
    EVALUATE,
    RETIRE,
    TEARDOWN,
    RELEASE,
    ROUTE,
)
"""Every activity a deploy schedules now (the positional forms left out)."""
