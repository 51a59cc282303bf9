"""One call's deadline and criticality in the API server: read from the caller or the run,
sent on to the runner as the time left.

Time is kept on `time.perf_counter`, the clock the invoke path times itself with; what
crosses to the runner is a duration (`X-Plnt-Timeout-Ms`), never a moment, so the two
processes' clocks never need to agree. No I/O.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from plnt.api import errors
from plnt.api.headers import (
    CRITICALITY_HEADER,
    TIMEOUT_HEADER,
    Criticality,
    InvalidTimeout,
    parse_time_left_ms,
    parse_timeout,
)
from plnt.apiserver import keys

_DEADLINE_GRACE = 0.25
"""Seconds the API server waits for the runner past the call's deadline, so the runner's own
504 (which names the hop that ran out) reaches the caller rather than the API server's."""


@dataclass(frozen=True, slots=True)
class CallLimits:
    """One call's deadline (on `time.perf_counter`) and criticality, as forwarded, and the
    invoke timeout no wait for the runner exceeds."""

    deadline: float
    criticality: Criticality
    ceiling: float

    def headers(self) -> dict[str, str]:
        """The hop's headers: the time left now and the criticality."""
        left = max(self.deadline - time.perf_counter(), 0.0)
        return {TIMEOUT_HEADER: f"{left * 1000.0:.0f}", CRITICALITY_HEADER: self.criticality}

    def client_timeout(self) -> aiohttp.ClientTimeout:
        """How long to wait for the runner: the time left and a grace, at most the ceiling."""
        left = max(self.deadline - time.perf_counter(), 0.0)
        return aiohttp.ClientTimeout(total=min(left + _DEADLINE_GRACE, self.ceiling))


def call_limits(request: web.Request, run: dict[str, Any], *, began: float) -> CallLimits:
    """The call's deadline: the caller's (`?timeout=`, else `X-Plnt-Timeout-Ms`), else the
    run's `spec.calls.timeoutSeconds`, else the invoke timeout, never beyond the invoke
    timeout; its criticality: `X-Plnt-Criticality`, else the run's default. 400 naming the
    parameter or header for a value that is not one."""
    ceiling = request.app[keys.SETTINGS].limits.invoke_timeout_seconds
    defaults = (run.get("spec") or {}).get("calls") or {}
    try:
        if "timeout" in request.query:
            seconds: float | None = parse_timeout(request.query["timeout"])
        elif TIMEOUT_HEADER in request.headers:
            seconds = parse_time_left_ms(request.headers[TIMEOUT_HEADER])
        else:
            seconds = defaults.get("timeoutSeconds")
    except InvalidTimeout as error:
        raise errors.BadRequest(f"timeout: {error}") from error
    try:
        criticality = Criticality.of_header(
            request.headers.get(CRITICALITY_HEADER),
            Criticality(defaults.get("criticality") or Criticality.STANDARD),
        )
    except ValueError as error:
        raise errors.BadRequest(str(error)) from error
    seconds = ceiling if seconds is None else min(float(seconds), ceiling)
    return CallLimits(began + seconds, criticality, ceiling)
