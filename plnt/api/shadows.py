"""Shadow traffic for the quality gate (`spec.canary.shadow`) and what it leaves behind.

While a canary is under analysis, the API server mirrors a sampled share of the live
invocations its stable revision answers to the canary: the caller gets the stable's
answer; the canary's is recorded beside it as a *pair* and never returned. The saga
marks the window in the canary's `status.traffic` entry (`shadow`, a `ShadowWindow`);
the API server reads it there. The pairs are answered by `GET …/workflowruns/NAME/shadow`
(`ShadowList`), which the evaluate step reads until it holds `minComparisons` of them,
and scores them with the shadow's scorers (`expect`, default: the canary's output must
equal the stable's, the scorer named `agreement`).

No I/O here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from plnt.api.base import WireModel
from plnt.api.evaluations import Scorer

AGREEMENT = "agreement"
"""The default shadow scorer's name: the canary's output equals the stable's."""
DEFAULT_MIN_COMPARISONS = 10
DEFAULT_TIMEOUT_SECONDS = 300
DEFAULT_QUEUE_SIZE = 64
MAX_TIMEOUT_SECONDS = 1800
PAIRS_KEPT = 200
"""Pairs an API server keeps per run: the reader collects them as they come."""


class CanaryShadow(WireModel):
    """Mirror a share of live invocations to the canary while it is under analysis."""

    percent: int = Field(
        ge=1, le=100, description="Percent of the stable's live invocations mirrored."
    )
    min_comparisons: int = Field(
        default=DEFAULT_MIN_COMPARISONS,
        ge=1,
        le=1000,
        description="Pairs (stable's answer, canary's answer) the quality gate waits for.",
    )
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT_SECONDS,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description="How long the quality gate waits for them before it fails.",
    )
    queue_size: int = Field(
        default=DEFAULT_QUEUE_SIZE,
        ge=1,
        le=10000,
        description=(
            "Mirrored calls an API server holds for the canary at once; one more is dropped"
            " (and counted), so mirroring never slows a caller."
        ),
    )
    expect: list[Scorer] | None = Field(
        default=None,
        max_length=16,
        description=(
            "Scorers of both answers (no case's expectations fit live inputs); judge scorers"
            " compare the pair. Default: `agreement`, the canary's output equals the stable's."
        ),
    )


class ShadowWindow(WireModel):
    """In the canary's `status.traffic` entry: live calls to the stable are mirrored to it."""

    percent: int = Field(ge=1, le=100)
    queue_size: int = Field(default=DEFAULT_QUEUE_SIZE, ge=1)
    since: str | None = Field(default=None, description="When the window opened (RFC 3339).")


class ShadowAnswer(WireModel):
    """One revision's answer to a mirrored input."""

    revision: int
    status: int = Field(description="HTTP status of its answer.")
    output: Any = None
    error: str | None = None
    duration_ms: float = 0.0


class ShadowPair(WireModel):
    """One live input, the stable's answer the caller got, the canary's answer to it."""

    id: str
    time: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    stable: ShadowAnswer
    canary: ShadowAnswer


class ShadowList(WireModel):
    """`GET …/workflowruns/NAME/shadow`: this API server's pairs for the canary revision."""

    api_version: Literal["plnt.work/v1"] = "plnt.work/v1"
    kind: Literal["WorkflowRunShadowList"] = "WorkflowRunShadowList"
    revision: int | None = Field(default=None, description="The canary revision asked for.")
    dropped: int = Field(
        default=0, description="Mirrored calls dropped because the queue was full."
    )
    items: list[ShadowPair] = Field(default_factory=list)
