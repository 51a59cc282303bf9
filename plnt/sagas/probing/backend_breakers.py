"""A PlntBackend's circuit breakers, as the runners that call it report them.

Each runner keeps a breaker per backend it calls (its backend and its fallback) and
answers `GET /breakers` (`plnt.api.breakers`). The prober asks every ready runner of the
backend's namespace (the endpoints in its runs' `status.traffic`) and keeps the reports
that name this backend; `aggregate` folds them into the backend's `status.breaker`:
open when any runner's breaker is open (that runner sends the backend nothing, and its
callers get the fallback or a refusal), else half-open when any is probing, else closed.
A runner that does not answer within a second is left out: its own state is unknown, and
the status says how many runners reported. Every backend of a namespace is called by
the same runners, so a round of probes asks them once per namespace (`RunnerReports`:
one list of the runs, one `GET /breakers` per runner) and folds the answers per backend.

Why the prober and not the runners write it: runners have no API credentials and may be
many; the prober already writes the backend's status and records the Events of its
transitions in one decision (`backend_status`, `backend_transitions`: BreakerOpened,
BreakerClosed).

`aggregate` is pure; `RunnerReports` does the I/O (aiohttp and `plnt.client`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp
import pydantic

from plnt.api import breakers as api_breakers
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient

log = logging.getLogger("plnt.sagas")

_ASK_SECONDS = 1.0
_ORDER = {"closed": 0, "half_open": 1, "open": 2}


def aggregate(
    name: str, reports: Iterable[api_breakers.BreakerState]
) -> api_breakers.BackendBreaker | None:
    """`name`'s breaker over the runners' reports (one per runner); None: none reported."""
    mine = [report for report in reports if report.backend == name]
    if not mine:
        return None
    worst = max(mine, key=lambda report: _ORDER[report.state]).state
    in_state = sorted((r for r in mine if r.state == worst), key=lambda r: r.since)
    opened = sorted((r for r in mine if r.state == "open"), key=lambda r: r.since)
    return api_breakers.BackendBreaker(
        state=worst,
        since=in_state[0].since,
        opened_by=opened[0].reason if opened else None,
        runners=len(mine),
        open=len(opened),
    )


def runner_endpoints(runs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ready runners' base URLs in the runs' `status.traffic`, each once, in order."""
    found: dict[str, None] = {}
    for run in runs:
        for target in (run.get("status") or {}).get("traffic") or []:
            for endpoint in target.get("endpoints") or []:
                found[str(endpoint).rstrip("/")] = None
    return list(found)


class RunnerReports:
    """The breakers the runners of each namespace report, asked once per namespace for
    the probes of one round (or one probe) that share this value."""

    def __init__(self, http: aiohttp.ClientSession, api: PlntClient) -> None:
        self._http = http
        self._api = api
        self._asked: dict[str, list[api_breakers.BreakerState] | None] = {}
        # One asker per namespace; a probe cancelled while asking (its budget) leaves the
        # question to the next one.
        self._asking: dict[str, asyncio.Lock] = {}

    async def breaker(self, backend: Mapping[str, Any]) -> dict[str, Any] | None:
        """The backend's `status.breaker` now (wire form), or None when no runner reports one."""
        meta = backend.get("metadata") or {}
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        reports = await self._of(namespace)
        found = aggregate(name, reports or ())
        return None if found is None else found.to_wire()

    async def _of(self, namespace: str) -> list[api_breakers.BreakerState] | None:
        """What the ready runners of `namespace`'s runs report (None: the runs could not
        be listed)."""
        async with self._asking.setdefault(namespace, asyncio.Lock()):
            if namespace not in self._asked:
                self._asked[namespace] = await self._ask_runners(namespace)
            return self._asked[namespace]

    async def _ask_runners(self, namespace: str) -> list[api_breakers.BreakerState] | None:
        try:
            runs = await self._api.list_workflowruns(namespace=namespace)
        except client_errors.ClientError as error:
            log.info("breakers of the runners in %s: listing runs: %s", namespace, error)
            return None
        answers = await asyncio.gather(*(_ask(self._http, url) for url in runner_endpoints(runs)))
        return [state for states in answers for state in states]


async def _ask(http: aiohttp.ClientSession, url: str) -> list[api_breakers.BreakerState]:
    """One runner's breakers; none when it does not answer in time or answers otherwise."""
    try:
        timeout = aiohttp.ClientTimeout(total=_ASK_SECONDS)
        async with http.get(f"{url}{api_breakers.RUNNER_PATH}", timeout=timeout) as response:
            if response.status != 200:
                return []
            body = await response.json()
        return api_breakers.RunnerBreakers.model_validate(body).breakers
    except (aiohttp.ClientError, TimeoutError, ValueError, pydantic.ValidationError):
        return []
