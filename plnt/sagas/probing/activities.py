"""Placement's activity: the backend for a deploy's model steps, chosen by measured capacity.

The deploy's resolve step schedules it by name (`plnt.sagas.activitynames`): it probes
every PlntBackend of the namespace (`backend_probes`, recording transitions' Events on
the worker's one poster, so the periodic prober's repeats and its own count into one
Event) and lets `placement` choose. It runs on the worker's API client and HTTP session
(the deploy activities', which close them once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp
from temporalio import activity

from plnt.client.clients import PlntClient
from plnt.client.events import EventPoster
from plnt.sagas import activitynames
from plnt.sagas import values as v
from plnt.sagas.activityfailures import fail
from plnt.sagas.failures import Failure
from plnt.sagas.probing import backend_probes, placement


class PlacementActivities:
    """Resolving a run's backend, on shared clients: `http` hands out the worker's session."""

    def __init__(
        self,
        *,
        api: PlntClient,
        http: Callable[[], aiohttp.ClientSession],
        events: EventPoster,
    ) -> None:
        self.api = api
        self.http = http
        self.events = events

    def all(self) -> list[Any]:
        """Every activity, for `Worker(activities=...)`."""
        return [self.resolve, self.resolve_positional]

    @activity.defn(name=activitynames.RESOLVE_BACKEND)
    async def resolve(self, request: v.ResolveRequest) -> v.Resolved:
        """The backend for model steps: by name, or the matching one with most headroom.

        A run that names no backend, selects none and asks for no pool or GPU class gets
        the built-in echo backend.
        """
        return await self._resolve(request, pool=request.pool)

    async def _resolve(self, request: v.ResolveRequest, *, pool: str | None) -> v.Resolved:
        attempt = activity.info().attempt
        selects = bool(request.name or request.selector is not None or request.gpu_class or pool)
        listed: list[dict[str, Any]] = []
        if selects or request.fallback:
            listed = await self.api.list_backends(namespace=request.namespace)
        fallback = _fallback(listed, request) if request.fallback else None
        if not selects:
            return v.Resolved(
                v.Backend(type="echo", model=request.model, fallback=fallback), attempt
            )
        backends = await backend_probes.probe_all(self.http(), self.api, listed, events=self.events)
        try:
            choice = placement.choose(
                backends,
                name=request.name,
                selector=request.selector,
                gpu_class=request.gpu_class,
                model=request.model,
                pool=pool,
                now=datetime.now(UTC),
                stale_after=placement.STALE_AFTER_INTERVALS * placement.DEFAULT_PROBE_INTERVAL,
                ttft_objective_ms=request.ttft_objective_ms,
            )
        except placement.NoBackend as error:
            # Retried a few times by the policy (a backend may be created just after the run).
            raise fail(Failure.NO_BACKEND, str(error), retryable=True) from error
        chosen = _backend_of(choice.backend, model=request.model)
        if fallback is not None and fallback.name == chosen.name:
            fallback = None  # placement chose the fallback itself: nothing more to fall back on
        chosen.fallback = fallback
        if pool:  # the pool's other backends the runners may spill a call to
            chosen.spill = _spill_backends(backends, choice.name, pool, chosen.model, request)
        return v.Resolved(
            chosen, attempt, headroom=choice.headroom, explanation=choice.explanation()
        )

    # Sagas recorded before typed inputs schedule this name with positional arguments.

    @activity.defn(name=activitynames.RESOLVE_POSITIONAL)
    async def resolve_positional(
        self, namespace: str, selection: dict[str, Any], gpu_class: str | None
    ) -> v.Resolved:
        """`resolve-backend`, as scheduled by sagas that began before typed activity inputs."""
        return await self._resolve(
            v.ResolveRequest(
                namespace=namespace,
                name=selection.get("name"),
                selector=selection.get("selector"),
                model=selection.get("model"),
                gpu_class=gpu_class,
            ),
            pool=selection.get("pool") or None,
        )


def _fallback(listed: list[dict[str, Any]], request: v.ResolveRequest) -> v.Backend:
    """The run's `spec.fallback`, by name among the namespace's backends: it must exist,
    but need not answer now.

    A fallback serves only while the primary cannot, so a fallback that is down at
    deploy time does not hold the deploy; its own breaker keeps its calls short.
    """
    name = request.fallback
    found = next((b for b in listed if (b.get("metadata") or {}).get("name") == name), None)
    if found is None:
        message = f'spec.fallback.name: PlntBackend "{name}" not found in {request.namespace}'
        raise fail(Failure.NO_BACKEND, message, retryable=True)
    return _backend_of(found, model=request.fallback_model)


def _backend_of(backend: Mapping[str, Any], *, model: str | None) -> v.Backend:
    """A PlntBackend as the runner's backend config takes it (`model`, else its first)."""
    spec = backend.get("spec") or {}
    models = spec.get("models") or []
    credentials = spec.get("credentialsRef") or {}
    capacity = spec.get("capacity") or {}
    return v.Backend(
        name=backend["metadata"]["name"],
        type=str(spec.get("type", "openai")),
        endpoint=spec.get("endpoint"),
        model=model or (models[0] if models else None),
        secret_name=credentials.get("name"),
        secret_key=credentials.get("key"),
        max_concurrency=capacity.get("maxConcurrency"),
    )


def _spill_backends(
    backends: list[dict[str, Any]],
    chosen: str,
    pool: str,
    model: str | None,
    request: v.ResolveRequest,
) -> list[v.Backend]:
    """The pool's other backends the runners may spill a call to (`placement`)."""
    out = []
    for backend in placement.spill_candidates(
        backends, chosen=chosen, pool=pool, model=request.model, gpu_class=request.gpu_class
    ):
        spec = backend.get("spec") or {}
        models = spec.get("models") or []
        out.append(
            v.Backend(
                name=backend["metadata"]["name"],
                type=str(spec["type"]),
                endpoint=spec.get("endpoint"),
                model=model if model in models or not models else models[0],
            )
        )
    return out
