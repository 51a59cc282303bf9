"""Spill-over: when a run's primary backend misses its objective, new calls go to another
backend of its pool that meets it, and come back when the primary recovers.

Why the decision is here: the API server relays every call of a run and keeps its recent
calls for `status.slo` (`attainment.Windows`, all workers' calls under `--workers`), and it
reads every PlntBackend's probed TTFT from its own store; a runner sees only its own
replica's calls. The runner makes the backend calls, so the API server names the backend
on the call (`X-Plnt-Spill-To`) and the runner, deployed with the pool's other backends
(`plnt.runner.spilling`), calls it and says so on its answer. Only calls the runner
confirmed are logged as spilled (`spilledTo` in the invocation log) and counted
(`plnt_workflowrun_spilled_calls_total{namespace, workflowrun, backend}`).

A run spills when it names a pool (`spec.backend.pool`) and a `timeToFirstToken` objective
(else a `latency` one), and, per run, on a state refreshed at most every
`REFRESH_SECONDS` on the call path (no task of its own):

* **on the primary**: the primary's own calls (those not spilled) since the last change,
  within the objective's window, are judged as `status.slo` judges them; at least
  `MIN_CALLS` of them and a share within the threshold below the objective's percentile
  spill the run to the pool's backend with the best probed TTFT that meets the threshold
  (reachable, `status.timeToFirstTokenMilliseconds`), with a Warning Event `SpillingOver`
  naming the attainment, the objective and the backend. Nothing to spill to: the run
  stays (and `status.slo` shows the miss).
* **spilled**: it returns to the primary once a probe of the primary made after the spill
  began measures a TTFT within the threshold (Normal Event `SpillOverEnded`); it moves to
  another backend, or returns, when the one it spills to stops meeting it. After a return
  the primary is judged on its new calls only, so the calls that made it spill do not make
  it spill again at once.

With several workers each keeps its own state from the same calls and the same probes, and
only the one that writes `status.slo` (worker 0) records the Events.

No errors of its own: a backend store that cannot be read leaves the state as it was.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from plnt.api import errors, slo
from plnt.api.runs import RunKey
from plnt.apiserver.workflowruns import attainment
from plnt.registry.changes import Change, EventSink, Transition
from plnt.registry.options import ListOptions
from plnt.registry.store import ResourceStore

log = logging.getLogger("plnt.spill")

REFRESH_SECONDS = 1.0
"""How stale a run's spill state may be when a call asks for it."""
MIN_CALLS = 3
"""Calls of the primary a verdict needs: one slow call is not a trend."""


@dataclass(frozen=True, slots=True)
class Objective:
    """The objective a run spills on: `timeToFirstToken`, else `latency`."""

    name: str
    percentile: float
    milliseconds: float
    window_seconds: int

    @classmethod
    def of(cls, objectives: slo.ServiceLevelObjectives) -> Objective | None:
        for name, latency in (
            ("timeToFirstToken", objectives.time_to_first_token),
            ("latency", objectives.latency),
        ):
            if latency is not None:
                return cls(
                    name, latency.percentile, latency.milliseconds, objectives.window_seconds
                )
        return None

    def measure(self, call: attainment.Call) -> float | None:
        """What the objective reads of a call (None: nothing to judge, or it failed)."""
        if call.error:
            return None
        return call.first_token_ms if self.name == "timeToFirstToken" else call.latency_ms


@dataclass(frozen=True, slots=True)
class Candidate:
    """A backend of the pool as its last probe left it."""

    name: str
    ttft_ms: int | None
    reachable: bool | None
    probed_at: float | None

    @classmethod
    def of(cls, backend: Mapping[str, Any]) -> Candidate:
        status = backend.get("status") or {}
        ttft = status.get("timeToFirstTokenMilliseconds")
        return cls(
            str((backend.get("metadata") or {}).get("name")),
            ttft if isinstance(ttft, int) and not isinstance(ttft, bool) else None,
            status.get("reachable") if isinstance(status.get("reachable"), bool) else None,
            attainment.unix_time(status.get("lastProbeTime")),
        )

    def meets(self, objective: Objective) -> bool:
        return (
            self.reachable is not False
            and self.ttft_ms is not None
            and self.ttft_ms <= objective.milliseconds
        )


@dataclass
class RunSpill:
    """One run's spill state."""

    target: str | None = None
    since: float = 0.0
    """When the current state began: the primary is judged on its calls after it."""
    checked: float = -math.inf


@dataclass(frozen=True, slots=True)
class Decision:
    """Where new calls go, and the Event that says a change (None: no change)."""

    target: str | None
    event: Transition | None = None


def primary_attainment(
    calls: Sequence[attainment.Call], objective: Objective, *, since: float
) -> tuple[float, int] | None:
    """The share of the primary's calls since `since` within the threshold, and how many
    were judged; None below `MIN_CALLS`."""
    judged = [
        measured
        for call in calls
        if call.at >= since
        and call.spilled_to is None
        and (measured := objective.measure(call)) is not None
    ]
    if len(judged) < MIN_CALLS:
        return None
    within = sum(1 for measured in judged if measured <= objective.milliseconds)
    return within / len(judged), len(judged)


def _ms(value: float) -> str:
    return f"{value:g} ms"


def decide(
    state: RunSpill,
    *,
    objective: Objective,
    pool: str,
    primary: Candidate | None,
    candidates: Sequence[Candidate],
    calls: Sequence[attainment.Call],
    now: float,
) -> Decision:
    """Where the run's new calls go now (see the module docstring). Pure."""
    meeting = sorted(
        (c for c in candidates if c.meets(objective)), key=lambda c: (c.ttft_ms, c.name)
    )
    target = f"objective {_ms(objective.milliseconds)} at p{objective.percentile:g}"
    primary_name = primary.name if primary is not None else "the primary"
    if state.target is None:
        since = max(state.since, now - objective.window_seconds)
        judged = primary_attainment(calls, objective, since=since)
        if judged is None or judged[0] * 100.0 >= objective.percentile or not meeting:
            return Decision(None)
        share, count = judged
        best = meeting[0]
        message = (
            f"{objective.name} attainment {share:.0%} of {count} calls on {primary_name} is "
            f"below {target}: new calls spill to {best.name} of pool {pool} "
            f"(TTFT {_ms(best.ttft_ms or 0)})"
        )
        return Decision(best.name, Transition("Warning", "SpillingOver", message))
    recovered = (
        primary is not None
        and primary.meets(objective)
        and primary.probed_at is not None
        and primary.probed_at > state.since
    )
    if recovered:
        assert primary is not None
        message = (
            f"{primary_name} meets {target} again (TTFT {_ms(primary.ttft_ms or 0)}): new "
            f"calls return to it from {state.target}"
        )
        return Decision(None, Transition("Normal", "SpillOverEnded", message))
    if any(c.name == state.target for c in meeting):
        return Decision(state.target)
    if meeting:
        best = meeting[0]
        message = (
            f"{state.target} no longer meets {target}: new calls spill to {best.name} of "
            f"pool {pool} (TTFT {_ms(best.ttft_ms or 0)})"
        )
        return Decision(best.name, Transition("Warning", "SpillingOver", message))
    message = (
        f"no backend of pool {pool} meets {target} any longer: new calls return to {primary_name}"
    )
    return Decision(None, Transition("Normal", "SpillOverEnded", message))


class Spiller:
    """Every run's spill state, refreshed on the call path (module docstring)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        windows: attainment.Windows,
        objectives: Callable[[str, str], slo.ServiceLevelObjectives | None],
        backends: Callable[[], ResourceStore | None],
        events: Callable[[], EventSink | None],
        clock: Callable[[], float],
    ) -> None:
        self._windows = windows
        self._objectives = objectives
        self._backends = backends
        self._events = events
        self._clock = clock
        self._runs: dict[RunKey, RunSpill] = {}
        self.spilled = Counter(
            "plnt_workflowrun_spilled_calls_total",
            "Calls of a run served by another backend of its pool because its primary "
            "missed the run's objective (spec.slo), by the backend that served them.",
            ("namespace", "workflowrun", "backend"),
            registry=registry,
        )

    def state(self, key: RunKey) -> RunSpill | None:
        return self._runs.get(key)

    async def target_for(self, obj: Mapping[str, Any]) -> str | None:
        """The backend the run's next call should spill to (None: its own)."""
        spec = obj.get("spec") or {}
        pool = (spec.get("backend") or {}).get("pool")
        key = RunKey.of(obj)
        stated = self._objectives(key.namespace, key.name) if pool else None
        objective = Objective.of(stated) if stated is not None else None
        if objective is None:
            self._runs.pop(key, None)
            return None
        state = self._runs.setdefault(key, RunSpill())
        now = self._clock()
        if now - state.checked < REFRESH_SECONDS:
            return state.target
        state.checked = now
        store = self._backends()
        if store is None:
            return state.target
        try:
            page = await store.list(key.namespace, ListOptions(resource_version="0"))
        except errors.APIError as error:
            log.info("spill state of %s/%s not refreshed: %s", key.namespace, key.name, error)
            return state.target
        primary_name = (obj.get("status") or {}).get("backend") or (spec.get("backend") or {}).get(
            "name"
        )
        pooled = [b for b in page.items if (b.get("spec") or {}).get("pool") == pool]
        by_name = {c.name: c for c in map(Candidate.of, pooled)}
        primary = by_name.pop(str(primary_name), None) if primary_name else None
        decision = decide(
            state,
            objective=objective,
            pool=str(pool),
            primary=primary,
            candidates=list(by_name.values()),
            calls=self._windows.calls(key),
            now=now,
        )
        if decision.event is not None:
            state.target, state.since = decision.target, now
            self._record(obj, decision.event)
        return state.target

    def count(self, namespace: str, name: str, backend: str) -> None:
        """One call the runner confirmed it spilled to `backend`."""
        self.spilled.labels(namespace, name, backend).inc()

    def forget(self, key: RunKey) -> None:
        self._runs.pop(key, None)

    def _record(self, obj: Mapping[str, Any], event: Transition) -> None:
        log.info("%s: %s", event.reason, event.message)
        sink = self._events()
        if sink is not None:
            after = dict(obj)
            sink.record_change(Change(before=after, after=after), lambda _change: [event])
