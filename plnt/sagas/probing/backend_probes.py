"""Probing PlntBackends, and writing what was found to their status.

Two callers: the resolve activity probes the namespace's backends when a deploy
resolves its backend (so placement never trusts an old status), and `Prober`, run by
each worker, probes every PlntBackend of every namespace every interval (so
`kubectl get pb -o wide` shows live load and latency without any deploy). A probe asks a
backend with an endpoint whether its API is up (`GET {endpoint}/models`, timed) and, by
type and spec, for its load:

* vllm: `GET {root}/metrics`, the scheduler gauges (running, waiting) and the KV-cache
  usage (`vllm:gpu_cache_usage_perc`, `vllm:kv_cache_usage_perc` in newer releases);
* ollama: `GET {root}/api/ps`, the models held in memory. ollama reports no count of
  requests running or waiting, so its `inFlight`/`queueDepth` stay unknown (null);
* `spec.metricsEndpoint` (any type): a DCGM exporter's `DCGM_FI_DEV_GPU_UTIL` and
  `DCGM_FI_DEV_FB_USED`/`DCGM_FI_DEV_FB_FREE` per GPU, for `gpuHeadroom`; and, when the
  type gave no load, the requests running and waiting it reports: vLLM's scheduler gauges,
  or plnt's own model server's (`plnt_model_requests_running`/`_waiting`, served by
  `plnt up --model`, whose PlntBackend names its `/metrics` here).

`gpuHeadroom` is the number of GPUs the metrics endpoint reports below 90% utilisation
and below 90% framebuffer use; 0 when vLLM's KV cache is at least 90% full (the server
admits no more sequences, whatever the GPUs do); the declared `capacity.gpus` when only
the KV cache is known and has room; null when nothing says. Unknown is written as null,
never as a made-up 0 and never left over from an older probe.

`timeToFirstTokenMilliseconds` is the first token's time of one small streamed chat
completion (`first_tokens`), asked right after the reachability check of a backend that
names a model and needs no credentials; null otherwise, or when it failed.

`probeError` is what the probe's first failing request said, in this order: the
reachability check, the type's load endpoint (vLLM's `/metrics`, ollama's `/api/ps`),
`spec.metricsEndpoint`, the first-token call; null when every request answered.

The status is written through the API's status subresource by `backend_status.record`,
which decides the new status from the one it read, writes it with that read's
resourceVersion (a conflict reads again and decides again) and records one Event per
transition (`backend_transitions`): a backend becoming unreachable or reachable again,
a probe failing for a new reason, headroom reaching or leaving zero, `Probed` flipping;
never an Event per probe. Each write is a complete measurement stamped with its own
`lastProbeTime`. A failed write is logged; the probe still counts for the caller.

`breaker` is the backend's circuit breakers as the runners calling it report them,
aggregated (`backend_breakers`); null when no runner reports one. Its changes are Events
too: BreakerOpened, BreakerClosed.

Activity-side code: I/O through aiohttp and `plnt.client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from plnt.api.meta import format_time, now_rfc3339
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.client.events import EventPoster
from plnt.processes import tasks
from plnt.sagas.probing import backend_breakers, backend_status, first_tokens, placement
from plnt.sagas.probing import probes as probing

log = logging.getLogger("plnt.sagas")

BUSY_PERCENT = 90.0
"""A GPU at or above this utilisation (DCGM_FI_DEV_GPU_UTIL) has no room."""

FULL_FRACTION = 0.9
"""A GPU whose framebuffer, or a vLLM server whose KV cache, is this full has no room."""

PROBED = "Probed"
_CONCURRENT_PROBES = 16
_PROBE_BUDGET = 15.0  # its requests (reachability, load, first token, breakers) and the write
_KV_CACHE = ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc")
_DCGM_UTIL, _DCGM_USED, _DCGM_FREE = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
)


# -- what backends report (pure) ------------------------------------------------------


@dataclass(frozen=True)
class Gpu:
    """One GPU as a DCGM exporter reports it (None: that gauge is absent)."""

    utilisation: float | None = None  # percent
    used_mib: float | None = None
    free_mib: float | None = None

    def has_room(self) -> bool:
        if self.utilisation is not None and self.utilisation >= BUSY_PERCENT:
            return False
        if self.used_mib is not None and self.free_mib is not None:
            total = self.used_mib + self.free_mib
            if total > 0 and self.used_mib / total >= FULL_FRACTION:
                return False
        return True


def parse_dcgm(text: str) -> dict[str, Gpu]:
    """The GPUs in a DCGM exporter's metrics text, keyed by host and UUID (or index)."""
    fields = {_DCGM_UTIL: "utilisation", _DCGM_USED: "used_mib", _DCGM_FREE: "free_mib"}
    found: dict[str, dict[str, float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            field = fields.get(family.name)
            if field is None:
                continue
            for sample in family.samples:
                labels = sample.labels
                gpu = labels.get("UUID") or labels.get("gpu") or labels.get("device") or "?"
                found.setdefault(f"{labels.get('Hostname', '')}/{gpu}", {})[field] = sample.value
    except ValueError:
        return {}
    return {key: Gpu(**values) for key, values in found.items()}


def parse_kv_cache_usage(text: str) -> float | None:
    """vLLM's KV-cache usage (0..1) of its fullest model, or None when not reported."""
    values: list[float] = []
    try:
        for family in text_string_to_metric_families(text):
            if family.name in _KV_CACHE:
                values += [sample.value for sample in family.samples]
    except ValueError:
        return None
    return max(values) if values else None


def parse_ollama_ps(body: Any) -> list[str] | None:
    """The models ollama holds in memory (`GET /api/ps`), or None for another answer."""
    if not isinstance(body, dict) or not isinstance(body.get("models"), list):
        return None
    return sorted(
        str(entry.get("name") or entry.get("model"))
        for entry in body["models"]
        if isinstance(entry, dict) and (entry.get("name") or entry.get("model"))
    )


def gpu_headroom(
    gpus: Mapping[str, Gpu] | None, kv_cache_usage: float | None, *, declared: int
) -> int | None:
    """GPUs with room (see the module docstring); None when nothing measured says."""
    if kv_cache_usage is not None and kv_cache_usage >= FULL_FRACTION:
        return 0
    if gpus:
        return sum(1 for gpu in gpus.values() if gpu.has_room())
    if kv_cache_usage is not None and declared > 0:
        return declared
    return None


def probed_condition(
    previous: list[dict[str, Any]] | None, *, fresh: bool, message: str, now: datetime
) -> list[dict[str, Any]]:
    """The conditions with `Probed` set; its transition time moves only when it flips."""
    status = "True" if fresh else "False"
    others = [c for c in previous or [] if c.get("type") != PROBED]
    old = next((c for c in previous or [] if c.get("type") == PROBED), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == status else None
    condition = {
        "type": PROBED,
        "status": status,
        "reason": "Fresh" if fresh else "Stale",
        "message": message,
        "lastTransitionTime": since or format_time(now),
    }
    return [*others, condition]


# -- probing (I/O) --------------------------------------------------------------------


async def measure(http: aiohttp.ClientSession, backend: Mapping[str, Any]) -> dict[str, Any]:
    """A status from probing `backend` now (every measured field; unknown as None), with
    the reachability probe's words under "probe". Empty for echo or no endpoint."""
    spec = backend.get("spec") or {}
    if spec.get("type") == "echo" or not spec.get("endpoint"):
        return {}
    endpoint = str(spec["endpoint"])
    up = await probing.check_reachable(http, endpoint)
    status: dict[str, Any] = {
        "reachable": up.ok,
        "latencyMilliseconds": up.milliseconds,
        "lastProbeTime": now_rfc3339(),
        "inFlight": None,
        "queueDepth": None,
        "kvCacheUsage": None,
        "gpuHeadroom": None,
        "loadedModels": None,
        "timeToFirstTokenMilliseconds": None,
        "probeError": None,
        "probe": up.detail,
    }
    failures: list[str] = [] if up.ok else [up.detail]
    first_token_failure: list[str] = []
    model = first_tokens.model_to_ask(spec)
    if up.ok and model is not None:
        first = await first_tokens.measure(http, endpoint, model)
        status["timeToFirstTokenMilliseconds"] = first.milliseconds
        if first.failed:
            first_token_failure.append(first.detail)
    kv_cache: float | None = None
    if up.ok and spec.get("type") == "vllm":
        text, detail = await probing.fetch_text(http, probing.metrics_url(endpoint))
        if text is None:
            failures.append(detail)
        load = probing.parse_vllm_load(text) if text is not None else None
        if load is not None:
            status["inFlight"], status["queueDepth"] = load.in_flight, load.queue_depth
        kv_cache = parse_kv_cache_usage(text) if text is not None else None
        status["kvCacheUsage"] = kv_cache
    if up.ok and spec.get("type") == "ollama":
        text, detail = await probing.fetch_text(http, probing.ollama_ps_url(endpoint))
        if text is None:
            failures.append(detail)
        status["loadedModels"] = _ollama_models(text)
    gpus = None
    if spec.get("metricsEndpoint"):
        text, detail = await probing.fetch_text(http, str(spec["metricsEndpoint"]))
        gpus = parse_dcgm(text) if text is not None else None
        load = probing.parse_load(text) if text is not None else None
        if load is not None and status["inFlight"] is None:
            status["inFlight"], status["queueDepth"] = load.in_flight, load.queue_depth
        if text is None:
            failures.append(detail)
            log.info("GPU metrics of %s: %s", _name(backend), detail)
    declared = int((spec.get("capacity") or {}).get("gpus") or 0)
    status["gpuHeadroom"] = gpu_headroom(gpus, kv_cache, declared=declared)
    failures += first_token_failure
    status["probeError"] = failures[0] if failures else None
    return status


def _ollama_models(text: str | None) -> list[str] | None:
    try:
        return parse_ollama_ps(json.loads(text)) if text is not None else None
    except ValueError:
        return None


async def probe_and_record(
    http: aiohttp.ClientSession,
    api: PlntClient,
    backend: dict[str, Any],
    *,
    events: EventPoster | None = None,
    breakers: backend_breakers.RunnerReports | None = None,
) -> dict[str, Any]:
    """Probe `backend`, write the result to its status (with the Events of what changed,
    given `events`), and return the backend with the result merged in (unknown fields
    dropped) as placement reads it. `breakers`: the runners' reports a round's probes
    share (None: asked for this backend alone)."""
    measured = await measure(http, backend)
    if not measured:
        return backend
    reports = breakers or backend_breakers.RunnerReports(http, api)
    measured["breaker"] = await reports.breaker(backend)
    probe = measured.pop("probe")
    message = f"{probe} in {measured['latencyMilliseconds']} ms"

    def patch_for(current: Mapping[str, Any]) -> dict[str, Any]:
        conditions = probed_condition(
            current.get("conditions"), fresh=True, message=message, now=datetime.now(UTC)
        )
        return {**measured, "conditions": conditions}

    written = await backend_status.record(api, backend, patch_for, events=events)
    if not measured["reachable"]:
        log.info("backend %s unreachable: %s", _name(backend), probe)
    if written is not None:
        merged = {**(written.get("status") or {}), "probe": probe}
    else:
        merged = {**(backend.get("status") or {}), **patch_for(backend.get("status") or {})}
        merged["probe"] = probe
    return {**backend, "status": {key: value for key, value in merged.items() if value is not None}}


async def probe_all(
    http: aiohttp.ClientSession,
    api: PlntClient,
    backends: list[dict[str, Any]],
    *,
    events: EventPoster | None = None,
) -> list[dict[str, Any]]:
    """`backends`, each with the status a probe made now (see `probe_and_record`)."""
    breakers = backend_breakers.RunnerReports(http, api)
    probes = (probe_and_record(http, api, b, events=events, breakers=breakers) for b in backends)
    return list(await asyncio.gather(*probes))


# -- the periodic prober --------------------------------------------------------------


class Prober:
    """Probes every PlntBackend of every namespace, one round every `interval` seconds.

    A round that fails (the API down, say) is logged and the next goes on. A backend
    whose probe fails or overruns its budget is logged, and once its status is older
    than `placement.STALE_AFTER_INTERVALS` intervals it is marked `Probed=False`
    (reason Stale, the age in the message); its next good probe sets `Probed=True`
    (reason Fresh) again.
    """

    def __init__(
        self,
        api: PlntClient,
        http: aiohttp.ClientSession,
        *,
        interval: float,
        events: EventPoster | None = None,
    ) -> None:
        self.api = api
        self.http = http
        self.interval = interval
        self.events = events
        self.rounds = 0

    @property
    def budget(self) -> float:
        """Seconds one backend's probe and write may take before it counts as failed."""
        return max(self.interval, _PROBE_BUDGET)

    @property
    def stale_after(self) -> float:
        return placement.STALE_AFTER_INTERVALS * self.interval

    async def run(self) -> None:
        """Probe until cancelled."""
        while True:
            try:
                await self.round()
            except (client_errors.ClientError, aiohttp.ClientError, TimeoutError) as error:
                log.warning("probing PlntBackends: %s", error)
            except Exception:  # a bug must not end probing for the worker's lifetime
                log.exception("probing PlntBackends failed")
            self.rounds += 1
            await asyncio.sleep(self.interval)  # the period itself, not a synchronisation

    async def round(self) -> None:
        """Probe every backend once, at most `_CONCURRENT_PROBES` at a time."""
        backends = await self.api.list_backends(all_namespaces=True)
        slots = asyncio.Semaphore(_CONCURRENT_PROBES)
        breakers = backend_breakers.RunnerReports(self.http, self.api)

        async def one(backend: dict[str, Any]) -> None:
            async with slots:
                try:
                    async with asyncio.timeout(self.budget):
                        await probe_and_record(
                            self.http, self.api, backend, events=self.events, breakers=breakers
                        )
                except Exception as error:
                    log.warning("probing PlntBackend %s: %s", _name(backend), error)
                    await self._mark_if_stale(backend)

        await asyncio.gather(*(one(backend) for backend in backends))

    async def _mark_if_stale(self, backend: dict[str, Any]) -> None:
        def patch_for(current: Mapping[str, Any]) -> dict[str, Any] | None:
            now = datetime.now(UTC)
            age = placement.status_age({"status": current}, now)
            if age is None or not placement.is_stale(age, self.stale_after):
                return None
            message = (
                f"last probed {placement.format_age(age)} ago "
                f"(stale after {placement.format_age(self.stale_after)})"
            )
            old = current.get("conditions")
            return {"conditions": probed_condition(old, fresh=False, message=message, now=now)}

        with contextlib.suppress(Exception):
            await backend_status.record(self.api, backend, patch_for, events=self.events)


@contextlib.asynccontextmanager
async def periodic(
    api: PlntClient, *, interval: float, events: EventPoster | None = None
) -> AsyncIterator[Prober | None]:
    """A `Prober` running in the background for the duration of the block (None and no
    task for `interval` 0), recording transitions' Events with `events`, beside the
    watcher that probes a backend as soon as it is created or its spec changes
    (`backend_watching`); both cancelled and awaited on exit."""
    from plnt.sagas.probing import backend_watching  # it imports this module

    if interval <= 0:
        yield None
        return
    async with aiohttp.ClientSession() as http:
        prober = Prober(api, http, interval=interval, events=events)
        watcher = backend_watching.SpecWatcher(api, http, budget=prober.budget, events=events)
        async with (
            tasks.running(prober.run(), name="plnt-backend-prober"),
            tasks.running(watcher.run(), name="plnt-backend-watcher"),
        ):
            yield prober


def _name(backend: Mapping[str, Any]) -> str:
    meta = backend.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
