"""The Events a PlntBackend's status change deserves: a pure comparison of two statuses.

The prober decides a backend's new status from its old one (`backend_probes`) and, in
the same write, records one Event per transition this module finds — never one per
probe, so an unchanged probe records nothing. A repeat of the same transition (a
backend that flaps) is counted into one Event by the writer (`plnt.client.events`).

Statuses are PlntBackend `status` objects as served (camelCase JSON); an absent field
and null both mean "not known". The transitions, in the order they are reported:

| change | type | reason |
|---|---|---|
| `reachable` becomes false (from true or unknown) | Warning | BackendUnreachable |
| `reachable` becomes true (from false or unknown) | Normal | BackendReachable |
| `probeError` becomes a new text, not already told by BackendUnreachable | Warning | ProbeFailed |
| `probeError` clears, not already told by BackendReachable | Normal | ProbeRecovered |
| `gpuHeadroom` becomes 0 (from more, or unknown) | Warning | HeadroomExhausted |
| `gpuHeadroom` leaves 0 for a positive number | Normal | HeadroomAvailable |
| the `Probed` condition becomes False | Warning | ProbeStale |
| the `Probed` condition becomes True after False | Normal | ProbeFresh |
| `breaker.state` becomes open (from closed, half-open or unknown) | Warning | BreakerOpened |
| `breaker.state` becomes closed after open or half-open | Normal | BreakerClosed |

Headroom that becomes unknown (a backend that stops answering) is no transition: the
next known value is compared with what was known last in status, which is nothing, so a
backend still full when it answers again says HeadroomExhausted again (counted into the
same Event within the writer's window).

No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NORMAL = "Normal"
WARNING = "Warning"

BACKEND_UNREACHABLE = "BackendUnreachable"
BACKEND_REACHABLE = "BackendReachable"
PROBE_FAILED = "ProbeFailed"
PROBE_RECOVERED = "ProbeRecovered"
HEADROOM_EXHAUSTED = "HeadroomExhausted"
HEADROOM_AVAILABLE = "HeadroomAvailable"
PROBE_STALE = "ProbeStale"
PROBE_FRESH = "ProbeFresh"

BREAKER_OPENED = "BreakerOpened"
BREAKER_CLOSED = "BreakerClosed"

PROBED = "Probed"


@dataclass(frozen=True)
class Transition:
    """One Event to record about the backend: Normal or Warning, a CamelCase reason and
    a message that names what was found (no timings, so a repeat reads the same)."""

    type: str
    reason: str
    message: str


Status = Mapping[str, Any]


def transitions(old: Status | None, new: Status | None) -> list[Transition]:
    """The Events of the change from `old` to `new` (see the module docstring's table)."""
    old, new = old or {}, new or {}
    found: list[Transition] = []
    was, now = old.get("reachable"), new.get("reachable")
    went_down = now is False and was is not False
    came_up = now is True and was is not True
    failure, previous_failure = new.get("probeError") or None, old.get("probeError") or None
    if went_down:
        found.append(Transition(WARNING, BACKEND_UNREACHABLE, failure or "the API did not answer"))
    elif came_up:
        found.append(Transition(NORMAL, BACKEND_REACHABLE, _reachable_message(was, old)))
    if failure and failure != previous_failure and not went_down:
        found.append(Transition(WARNING, PROBE_FAILED, failure))
    elif previous_failure and not failure and not came_up:
        message = f"every request of the probe answered again (it had failed: {previous_failure})"
        found.append(Transition(NORMAL, PROBE_RECOVERED, message))
    found += _headroom(old, new)
    found += _probed(old, new)
    found += _breaker(old, new)
    return found


def _breaker(old: Status, new: Status) -> list[Transition]:
    before = (old.get("breaker") or {}).get("state")
    after_breaker = new.get("breaker") or {}
    after = after_breaker.get("state")
    if after == "open" and before != "open":
        why = after_breaker.get("openedBy") or "the backend failed repeatedly"
        count = f"{after_breaker.get('open', 1)} of {after_breaker.get('runners', 1)}"
        message = f"{count} runner(s) stopped sending it calls: {why}"
        return [Transition(WARNING, BREAKER_OPENED, message)]
    if after == "closed" and before in ("open", "half_open"):
        message = "a probe call succeeded: the runners send it calls again"
        return [Transition(NORMAL, BREAKER_CLOSED, message)]
    return []


def _reachable_message(was: Any, old: Status) -> str:
    if was is False:
        failure = old.get("probeError")
        return f"reachable again (it was not: {failure})" if failure else "reachable again"
    return "reachable"


def _headroom(old: Status, new: Status) -> list[Transition]:
    before, after = old.get("gpuHeadroom"), new.get("gpuHeadroom")
    if after == 0 and before != 0:
        had = f" (it had {before})" if before else ""
        usage = new.get("kvCacheUsage")
        cache = f"; vLLM's KV cache is {usage:.0%} full" if isinstance(usage, int | float) else ""
        return [Transition(WARNING, HEADROOM_EXHAUSTED, f"no GPU has room{had}{cache}")]
    if before == 0 and isinstance(after, int) and after > 0:
        return [Transition(NORMAL, HEADROOM_AVAILABLE, f"{after} GPU(s) with room again")]
    return []


def _probed(old: Status, new: Status) -> list[Transition]:
    before, after = _condition(old, PROBED), _condition(new, PROBED)
    before_status = before.get("status") if before else None
    after_status = after.get("status") if after else None
    if after is not None and after_status == "False" and before_status != "False":
        message = str(after.get("message") or "the status is stale")
        return [Transition(WARNING, PROBE_STALE, message)]
    if after_status == "True" and before_status == "False":
        return [Transition(NORMAL, PROBE_FRESH, "probed again: the status is current")]
    return []


def _condition(status: Status, kind: str) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None
