"""A backend's circuit breaker on the wire: what a runner reports, what a PlntBackend shows.

Each runner keeps one breaker per backend it calls (its backend and its fallback) and
answers `GET /breakers` with their states (`RunnerBreakers`). The backend prober asks the
runners of the namespace's runs and writes the states of one PlntBackend's breakers,
aggregated over runners, into its `status.breaker` (`BackendBreaker`). Both sides parse
these models, so the names and states are written once. No I/O here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from plnt.api.base import WireModel

RUNNER_PATH = "/breakers"
"""Where a runner reports its breakers."""

State = Literal["closed", "half_open", "open"]


class BreakerState(WireModel):
    """One breaker of one runner."""

    backend: str = Field(description="The backend's name (its PlntBackend's, when it has one).")
    state: State
    since: str = Field(description="When it entered this state (RFC 3339).")
    reason: str | None = Field(default=None, description="Why it did.")


class RunnerBreakers(WireModel):
    """A runner's answer to `GET /breakers`."""

    breakers: list[BreakerState] = Field(default_factory=list)


class BackendBreaker(WireModel):
    """A PlntBackend's breakers across the runners that call it (`status.breaker`)."""

    state: State = Field(
        description="open when any runner's breaker is open, else half_open when any is "
        "probing, else closed."
    )
    since: str = Field(description="When the runners' breakers entered that state (earliest).")
    opened_by: str | None = Field(
        default=None, description="Why a breaker opened (the earliest open one's reason)."
    )
    runners: int = Field(description="Runners that reported a breaker for this backend.")
    open: int = Field(default=0, description="Of them, runners whose breaker is open.")
