"""`status.slo` of every WorkflowRun with `spec.slo`, judged on the calls it serves, and its
objectives exported as metrics for the burn-rate alerts.

Why here: the API server is where the calls pass (`invoke`, `proxy`) and where the runs
already are (its watch cache), so it can judge live traffic without another hop, as it
already exports every run's last bench (`benchgauges`). The runners see only their own
replica's calls and the deploy saga is not running between deploys; the API server sees
them all. With several workers every worker holds the whole server's recent calls (the
invocation log's shared stream feeds `attainment.Windows`), and only worker 0 writes, so
status is written once per pass, not once per worker; each API server replica of a cluster
writes what its own calls attained (a load balancer spreads them alike).

A pass every `INTERVAL_SECONDS`: for each run with `spec.slo`, cut its window from the
recent calls, judge it (`plnt.api.slo.judge`) with the prices of its backend
(`spec.pricing` of `status.backend`, else `spec.backend.name`), and write `status.slo`
through the status subresource only when something but its `updatedAt` changed (a merge
of one field: the saga's status fields are left alone, and the saga's merge patches leave
this one alone). A run without calls in its window gets `calls: 0` and objectives neither
met nor missed, once.

Metrics, on every worker (`Objectives`, kept by following WorkflowRuns, as `benchgauges`):
`plnt_workflowrun_slo_objective` (the threshold: seconds, a ratio, tokens/s or a cost),
`plnt_workflowrun_slo_error_budget_ratio` (the share of calls the objective allows to miss
it), `plnt_workflowrun_slo_attainment_ratio` and `plnt_workflowrun_slo_error_budget_remaining`
(from `status.slo`). Each call is also counted good or bad against each of its run's
latency objectives (`plnt_workflowrun_slo_calls_total`, by `RunLatency`), which is what
the alerts' burn rates divide.

Errors: none raised; a failed pass is logged and the next one tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic
from aiohttp import web
from prometheus_client.core import GaugeMetricFamily, Metric

from plnt.api import errors, slo
from plnt.api.meta import now_rfc3339
from plnt.api.runs import RunKey
from plnt.apiserver import following, keys
from plnt.apiserver.workflowruns import attainment, spilling
from plnt.apiserver.workflowruns import keys as run_keys
from plnt.processes import tasks
from plnt.registry import plntbackends, workflowruns
from plnt.registry.options import WriteOptions
from plnt.registry.store import ResourceStore

log = logging.getLogger("plnt.slo")

INTERVAL_SECONDS = 10.0
_LABELS = ["namespace", "workflowrun", "objective"]


@dataclass(frozen=True)
class RunObjectives:
    """What a pass needs of one run: its objectives, its backend, its last `status.slo`."""

    slo: slo.ServiceLevelObjectives
    backend: str | None
    status: Mapping[str, Any] | None


def thresholds(objectives: slo.ServiceLevelObjectives) -> dict[str, tuple[float, float]]:
    """Each objective's threshold in base units (seconds, ratio, tokens/s, cost) and the
    share of calls it allows to miss (its error budget)."""
    out: dict[str, tuple[float, float]] = {}
    for name, latency in (
        ("timeToFirstToken", objectives.time_to_first_token),
        ("timePerOutputToken", objectives.time_per_output_token),
        ("latency", objectives.latency),
    ):
        if latency is not None:
            out[name] = (latency.milliseconds / 1000.0, 1.0 - latency.percentile / 100.0)
    if objectives.max_error_rate is not None:
        out["errorRate"] = (objectives.max_error_rate, objectives.max_error_rate)
    if (rate := objectives.min_tokens_per_second) is not None:
        out["tokensPerSecond"] = (rate.tokens_per_second, 1.0 - rate.percentile / 100.0)
    if objectives.max_cost_per_million_tokens is not None:
        out["costPerMillionTokens"] = (objectives.max_cost_per_million_tokens, 0.0)
    return out


class Objectives(following.Gauges):
    """Every run's `spec.slo` (as the API server stores it) and the gauges it exports."""

    def __init__(self) -> None:
        self.runs: dict[RunKey, RunObjectives] = {}

    def update(self, obj: Mapping[str, Any]) -> None:
        key = RunKey.of(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        raw = spec.get("slo") if isinstance(spec, Mapping) else None
        try:
            objectives = slo.ServiceLevelObjectives.model_validate(raw) if raw else None
        except pydantic.ValidationError:
            objectives = None  # admitted before, refused now: nothing to judge against
        if objectives is None:
            self.runs.pop(key, None)
            return
        status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
        assert isinstance(status, Mapping) and isinstance(spec, Mapping)
        backend = status.get("backend") or (spec.get("backend") or {}).get("name")
        self.runs[key] = RunObjectives(
            objectives, str(backend) if backend else None, status.get("slo")
        )

    def forget(self, obj: Mapping[str, Any]) -> None:
        self.runs.pop(RunKey.of(obj), None)

    def clear(self) -> None:
        self.runs.clear()

    def of(self, namespace: str, name: str) -> slo.ServiceLevelObjectives | None:
        run = self.runs.get(RunKey(namespace, name))
        return run.slo if run is not None else None

    def collect(self) -> Iterator[Metric]:
        objective = GaugeMetricFamily(
            "plnt_workflowrun_slo_objective",
            "A run's objective (spec.slo): seconds for time to first token, time per output "
            "token and latency; a ratio for the error rate; tokens/s; a cost per million tokens.",
            labels=_LABELS,
        )
        budget = GaugeMetricFamily(
            "plnt_workflowrun_slo_error_budget_ratio",
            "Share of calls an objective allows to miss it (1 - percentile/100; the error "
            "rate itself): the denominator of a burn rate.",
            labels=_LABELS,
        )
        attained = GaugeMetricFamily(
            "plnt_workflowrun_slo_attainment_ratio",
            "Share of the window's calls that met the objective (status.slo).",
            labels=_LABELS,
        )
        remaining = GaugeMetricFamily(
            "plnt_workflowrun_slo_error_budget_remaining",
            "Share of the objective's error budget left over its window (status.slo).",
            labels=_LABELS,
        )
        for key, run in sorted(self.runs.items()):
            for name, (threshold, allowed) in thresholds(run.slo).items():
                objective.add_metric([key.namespace, key.name, name], threshold)
                if name != "costPerMillionTokens":
                    budget.add_metric([key.namespace, key.name, name], allowed)
            for judged in (run.status or {}).get("objectives") or []:
                if not isinstance(judged, Mapping) or not isinstance(judged.get("name"), str):
                    continue
                labels = [key.namespace, key.name, judged["name"]]
                if isinstance(value := judged.get("attainment"), int | float):
                    attained.add_metric(labels, float(value))
                if isinstance(value := judged.get("budgetRemaining"), int | float):
                    remaining.add_metric(labels, float(value))
        yield from (objective, budget, attained, remaining)


def _comparable(status: Any) -> Any:
    if not isinstance(status, Mapping):
        return None
    return {k: v for k, v in status.items() if k != "updatedAt"}


async def _pricing(app: web.Application, namespace: str, name: str | None) -> Any:
    store = _backend_store(app)
    if not name or store is None:
        return None
    try:
        backend = await store.get(namespace, name, resource_version="0")
    except errors.APIError:
        return None
    raw = (backend.get("spec") or {}).get("pricing")
    try:
        return slo.BackendPricing.model_validate(raw) if raw else None
    except pydantic.ValidationError:
        return None


async def judge_run(
    app: web.Application, key: RunKey, run: RunObjectives, *, now: float
) -> slo.SLOStatus:
    """`status.slo` of one run now, from the calls this server holds."""
    calls = app[run_keys.INVOKER].windows.calls(key)
    samples = attainment.samples_of(calls, since=now - run.slo.window_seconds, until=now)
    pricing = await _pricing(app, key.namespace, run.backend)
    judged = slo.judge(run.slo, samples, pricing=pricing)
    met, budget = slo.overall(judged)
    return slo.SLOStatus(
        window_seconds=run.slo.window_seconds,
        calls=samples.calls,
        objectives=judged,
        met=met,
        error_budget_remaining=budget,
        cost=slo.cost_of(pricing, samples) if pricing is not None and samples.calls else None,
        backend=run.backend if pricing is not None else None,
        updated_at=now_rfc3339(),
    )


async def write_pass(app: web.Application, objectives: Objectives) -> int:
    """Judge every run with objectives and write the `status.slo` that changed; how many."""
    store = app[keys.STORES][(workflowruns.DEFINITION.group, workflowruns.DEFINITION.plural)]
    now = time.time()
    written = 0
    for key, run in list(objectives.runs.items()):
        judged = (await judge_run(app, key, run, now=now)).to_wire()
        if _comparable(judged) == _comparable(run.status):
            continue

        def transform(obj: dict[str, Any], judged: dict[str, Any] = judged) -> dict[str, Any]:
            status = obj.get("status")
            if not isinstance(status, dict):
                status = obj["status"] = {}
            status["slo"] = judged
            return obj

        try:
            await store.update(
                key.namespace, key.name, transform, WriteOptions(), subresource="status"
            )
            written += 1
        except errors.APIError as error:  # gone, or refused: the next pass sees it
            log.info("status.slo of %s/%s not written: %s", key.namespace, key.name, error)
    return written


def _writes(app: web.Application) -> bool:
    """Only one worker of a server writes (worker 0); a single process always does."""
    peers = app.get(keys.PEERS)
    return peers is None or peers.slot.index == 0


async def _loop(app: web.Application, objectives: Objectives) -> None:
    while True:
        await asyncio.sleep(INTERVAL_SECONDS)
        try:
            await write_pass(app, objectives)
        except Exception:  # the loop must outlive any surprise; say it and go on
            log.exception("status.slo pass failed")


def _backend_store(app: web.Application) -> ResourceStore | None:
    stores = app.get(keys.STORES) or {}
    return stores.get((plntbackends.DEFINITION.group, plntbackends.DEFINITION.plural))


def _spiller(app: web.Application, objectives: Objectives) -> spilling.Spiller:
    """The spill state (`spilling`): it judges the calls the invoker keeps against the
    objectives followed here (parsed once per change of a run, not once per call), reads
    the backends' probes from this server's store, and records Events on the writing
    worker."""
    writes = _writes(app)
    return spilling.Spiller(
        app[keys.METRICS].registry,
        windows=app[run_keys.INVOKER].windows,
        objectives=objectives.of,
        backends=lambda: _backend_store(app),
        events=lambda: app.get(keys.EVENT_RECORDER) if writes else None,
        clock=time.time,
    )


async def context(app: web.Application) -> AsyncIterator[None]:
    """An aiohttp cleanup context (after the invoker's): follow WorkflowRuns' objectives,
    count calls against them, keep the runs' spill state and write `status.slo` on the
    writing worker."""
    objectives = Objectives()
    app[run_keys.LATENCY].objectives = objectives.of
    spiller = app[run_keys.SPILLER] = _spiller(app, objectives)
    prefix = workflowruns.DEFINITION.key_prefix()
    try:
        async with following.exported(app, objectives, prefix=prefix, name="slo objectives"):
            if not _writes(app):
                yield
                return
            async with tasks.running(_loop(app, objectives), name="slo status"):
                yield
    finally:
        app[keys.METRICS].registry.unregister(spiller.spilled)
    with contextlib.suppress(KeyError):
        app[run_keys.LATENCY].objectives = None
