"""The weights an HTTPRoute carries at each move of a deploy: pure, no I/O (workflow code).

A run's route (Gateway API `HTTPRoute`, made by the Kubernetes target) sends applications'
traffic to the Services of its revisions, with the same weights as plnt's own
`…/invoke` and `…/proxy` (`status.traffic`). The saga moves them in this order:

| move | backends | when |
|---|---|---|
| `canary` | stable `100 - w`, canary `w` | the `route` step, before the analysis or pause |
| `withdrawn` | stable `100` | the undo: a failed or cancelled canary, before its release goes |
| `promoted` | new `100`, old `0` | promotion begins (the old keeps draining in-flight requests) |
| `drained` | new `100` | after `canary.drainSeconds`, before the old release is uninstalled |

A weight of 0 keeps the old Service referenced while it drains, so no request is sent
to a backend that is being removed. The weights always add up to 100.
"""

from __future__ import annotations

from plnt.sagas import values as v


def canary(stable: int, revision: int, weight: int) -> list[v.RouteBackend]:
    """The canary takes `weight` percent beside the stable revision."""
    if not 0 <= weight <= 100:
        raise ValueError(f"a canary weight is a percentage, not {weight}")
    return [v.RouteBackend(stable, 100 - weight), v.RouteBackend(revision, weight)]


def withdrawn(stable: int) -> list[v.RouteBackend]:
    """Everything back on the stable revision (the canary's route undone)."""
    return [v.RouteBackend(stable, 100)]


def promoted(new: int, old: int | None) -> list[v.RouteBackend]:
    """Everything on the new revision; the old one, still draining, at weight 0."""
    if old is None or old == new:
        return [v.RouteBackend(new, 100)]
    return [v.RouteBackend(new, 100), v.RouteBackend(old, 0)]


def drained(new: int) -> list[v.RouteBackend]:
    """Only the new revision: the old one is about to be removed."""
    return [v.RouteBackend(new, 100)]


def describe(backends: list[v.RouteBackend]) -> str:
    """`revision 1: 90%, revision 2: 10%` (in the plan's order)."""
    return ", ".join(f"revision {b.revision}: {b.weight}%" for b in backends)
