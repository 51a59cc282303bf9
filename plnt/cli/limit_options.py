"""The options `plnt up` and `plnt serve` share: how much one API server takes on at once,
how long an idle connection stays open, and how long an invoke waits for its runner (an
option group, see `option_groups`).

The in-flight flags are kube-apiserver's (`--max-requests-inflight`,
`--max-mutating-requests-inflight`, 0 meaning no limit); plnt's defaults are sized for
one event loop (see `plnt.apiserver.settings.ServingLimits`). They are the server's
totals: with `--workers N` each worker process admits `ceil(limit / N)`.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer

from plnt.apiserver.settings import ServingLimits
from plnt.cli import option_groups

_DEFAULTS = ServingLimits()


@dataclasses.dataclass(frozen=True, slots=True)
class LimitOptions:
    """The serving limits as flags; `settings()` is what the servers take."""

    max_requests_inflight: Annotated[
        int,
        typer.Option(
            min=0,
            envvar="PLNT_MAX_REQUESTS_INFLIGHT",
            help="Read-only requests the server serves at once, shared among its --workers; "
            "more get 429 and Retry-After (0: no limit).",
        ),
    ] = _DEFAULTS.max_requests_inflight
    max_mutating_requests_inflight: Annotated[
        int,
        typer.Option(
            min=0,
            envvar="PLNT_MAX_MUTATING_REQUESTS_INFLIGHT",
            help="Mutating requests the server serves at once, shared among its --workers; "
            "more get 429 and Retry-After (0: no limit).",
        ),
    ] = _DEFAULTS.max_mutating_requests_inflight
    idle_connection_timeout: Annotated[
        float,
        typer.Option(
            min=0.001,
            envvar="PLNT_IDLE_CONNECTION_TIMEOUT",
            help="Seconds an idle keep-alive connection stays open (watches are never idle).",
        ),
    ] = _DEFAULTS.idle_connection_timeout_seconds
    invoke_timeout: Annotated[
        float,
        typer.Option(
            min=0.001,
            envvar="PLNT_INVOKE_TIMEOUT",
            help="Seconds …/invoke and …/proxy wait for a runner's whole answer, streams too.",
        ),
    ] = _DEFAULTS.invoke_timeout_seconds

    def settings(self) -> ServingLimits:
        return ServingLimits(
            max_requests_inflight=self.max_requests_inflight,
            max_mutating_requests_inflight=self.max_mutating_requests_inflight,
            idle_connection_timeout_seconds=self.idle_connection_timeout,
            invoke_timeout_seconds=self.invoke_timeout,
        )


with_limit_options = option_groups.takes("limits", LimitOptions)
"""`command(..., limits: LimitOptions)` as typer sees it: one `--option` per field."""
