"""The values the deploy workflow and its activities exchange.

Plain dataclasses of JSON-friendly fields: Temporal's default data converter
serialises them into the workflow history, so they are part of the history format.
Add fields only with defaults, never rename, or recorded histories stop replaying.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plnt.api.runs import RunRef as RunRef

# `RunRef` lives in `plnt.api.runs` (the API server keys runs by its `RunKey`); it is
# re-exported here, the module the saga's code names it by. Its payloads hold only its
# fields, so histories recorded before the move replay unchanged.

TASK_QUEUE = "plnt-deploy"


def workflow_id(namespace: str, name: str, uid: str) -> str:
    """The deploy workflow of one WorkflowRun: deterministic, and new for a recreated object."""
    return f"workflowrun/{namespace}/{name}/{uid}"


@dataclass
class Desired:
    """The desired state of a WorkflowRun, as one accepted write left it."""

    run: RunRef
    generation: int
    spec: dict[str, Any]
    deleting: bool = False
    rollback_to: int | None = None


@dataclass
class Backend:
    """A resolved inference backend (the runner's backend config)."""

    name: str | None = None
    type: str = "echo"
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    # The PlntBackend's credentialsRef: a reference only, so no key enters the history.
    secret_name: str | None = None
    secret_key: str | None = None
    max_concurrency: int | None = None
    """The PlntBackend's `capacity.maxConcurrency` (None: it sets none): each runner's
    admission limit, not divided by the replicas (docs/reliability.md)."""
    fallback: Backend | None = None
    """The run's `spec.fallback`, resolved: it serves the calls this backend sheds or
    refuses with an open breaker (None: no fallback; histories from before it decode so)."""
    # The pool's other backends a call may spill to (`spec.slo`, docs/slo.md), when the run
    # names a pool: each by name, type, endpoint and model, none with credentials.
    spill: list[Backend] = field(default_factory=list)


@dataclass
class Resolved:
    """The backend `resolve` chose, and on which attempt."""

    backend: Backend
    attempt: int = 1
    # Placement's measure when it chose among PlntBackends (None for the built-in echo).
    headroom: int | None = None
    # Why the others lost: "passed over: a (unreachable), b (headroom 0)" (None: no others).
    explanation: str | None = None


@dataclass
class Deployment:
    """A revision that runs: what it is and where its replicas listen."""

    revision: int
    digest: str
    ref: str
    backend: Backend
    replicas: int
    endpoints: list[str] = field(default_factory=list)
    ready_replicas: int = 0
    fingerprint: str = ""
    target: str = "local"
    route: str | None = None
    """`NAMESPACE/NAME` of the HTTPRoute that sends applications' traffic to it, if any."""


@dataclass
class PullRequest:
    """Fetch the spec at `ref` and verify it has `digest` (and, with `verify` or under the
    worker's signature policy for `namespace`, the required signer's signature)."""

    ref: str
    digest: str
    namespace: str | None = None
    verify: dict[str, Any] | None = None
    """The run's `spec.workflow.verify`, as written."""
    dataset_ref: str | None = None
    dataset_digest: str | None = None
    """The evaluation dataset, verified against the same signer before anything is installed."""


@dataclass
class ResolveRequest:
    """Choose the backend for model steps: by name, by label selector and headroom, or echo."""

    namespace: str
    name: str | None = None
    # A metav1.LabelSelector as the API writes it (matchLabels, matchExpressions).
    selector: dict[str, Any] | None = None
    model: str | None = None
    gpu_class: str | None = None
    pool: str | None = None
    # The run's timeToFirstToken objective (spec.slo), which placement ranks backends by.
    ttft_objective_ms: float | None = None
    # The run's spec.fallback: a PlntBackend by name, resolved beside the primary.
    fallback: str | None = None
    fallback_model: str | None = None


@dataclass
class PullResult:
    """A verified spec in the worker's spec cache."""

    digest: str
    size: int
    workflow: str
    has_smoke: bool
    attempt: int = 1
    signer: str | None = None
    """Who signed the spec (and the dataset), as verified (None: none was required)."""


@dataclass
class InstallRequest:
    """Make `replicas` replicas of `revision` (idempotent)."""

    run: RunRef
    revision: int
    ref: str
    digest: str
    backend: Backend
    replicas: int
    # `spec.cache` as the API writes it; the activity reads it with the API's model (and
    # its defaults), so the history keeps the API's own shape.
    cache: dict[str, Any] = field(default_factory=dict)
    target: str = "local"
    """`spec.target`: which target makes the replicas ("local" or "kubernetes")."""
    gpu_class: str | None = None
    route: dict[str, Any] | None = None
    """`spec.route` as the API writes it (None: the cluster's default decides)."""


@dataclass
class Installed:
    """Where an installed revision's replicas listen."""

    endpoints: list[str]
    ready_replicas: int
    attempt: int = 1
    route: str | None = None
    """`NAMESPACE/NAME` of the run's HTTPRoute when the target routes the run (histories
    recorded before routes decode None: no route moves)."""


@dataclass
class RouteBackend:
    """One revision's Service in a route, with its weight (percent)."""

    revision: int
    weight: int


@dataclass
class RouteRequest:
    """Make the run's HTTPRoute send traffic to `backends` (idempotent).

    No backends, or a `route` that is disabled: remove the run's HTTPRoute."""

    run: RunRef
    backends: list[RouteBackend]
    route: dict[str, Any] | None = None
    target: str = "kubernetes"


@dataclass
class Routed:
    """The route after a move: `NAMESPACE/NAME` (None: the run has none now)."""

    route: str | None
    message: str
    attempt: int = 1


@dataclass
class SmokeRequest:
    """Run the smoke case against every endpoint of the canary."""

    ref: str
    digest: str
    endpoints: list[str]
    inputs: dict[str, Any] | None = None
    expect: dict[str, Any] | None = None


@dataclass
class SmokeResult:
    """What the smoke case measured."""

    message: str
    skipped: bool = False
    attempt: int = 1


@dataclass
class AnalysisRequest:
    """Bench the canary and the stable side by side, then hold the canary to the limits.

    `requests` alone: that many invocations each, four at a time. `rate` (open loop)
    and `duration_seconds` make it a time-bound bench instead (`probing.analysis_plan`).
    The last three fields came with the bench form: histories recorded before them decode
    with their defaults, which select the original form.
    """

    ref: str
    digest: str
    canary: list[str]
    stable: list[str]
    requests: int
    inputs: dict[str, Any] | None = None
    max_error_rate: float | None = None
    max_p95_milliseconds: float | None = None
    rate: float | None = None
    duration_seconds: float | None = None
    min_cache_hit_rate: float | None = None
    slo: dict[str, Any] | None = None
    """`spec.slo` as stored: the canary is held to it too, streamed when it names token
    timings. Histories from before it decode with None (no objectives)."""


@dataclass
class AnalysisResult:
    """The canary's (and the stable's) error rate and p95 latency, and both bench results.

    `canary` and `stable` are `plnt.harness.BenchResult.to_json()` (absent in histories
    recorded before the bench form).
    """

    message: str
    error_rate: float
    p95_milliseconds: float
    stable_p95_milliseconds: float | None = None
    attempt: int = 1
    canary: dict[str, Any] | None = None
    stable: dict[str, Any] | None = None


@dataclass
class EvaluationRequest:
    """Run the evaluation's cases on the canary and the stable, and score them.

    `evaluation` is `spec.canary.evaluation` as the API stored it (the history keeps the
    API's JSON); `namespace` is where judge scorers' PlntBackends are looked up. With
    `shadow`, the pairs of shadow traffic for canary `revision` are collected and scored too.
    """

    namespace: str
    canary: list[str]
    stable: list[str]
    evaluation: dict[str, Any]
    name: str = ""
    """The run, whose shadow pairs are read (with `shadow`)."""
    revision: int = 0
    """The canary revision whose shadow pairs count."""
    shadow: dict[str, Any] | None = None
    """`spec.canary.shadow` as stored, when the canary was shadowed beside a stable."""


@dataclass
class EvaluationResult:
    """The quality gate's verdict and its record (`status.lastEvaluation`, camelCase)."""

    passed: bool
    message: str
    record: dict[str, Any]
    attempt: int = 1


@dataclass
class Report:
    """A status to write (merge patch of the fields the saga owns) and an optional Event."""

    run: RunRef
    status: dict[str, Any]
    event_type: str | None = None
    event_reason: str | None = None
    event_message: str | None = None


@dataclass
class RetireRequest:
    """Stop every replica of `revision` (idempotent)."""

    run: RunRef
    revision: int
    target: str = "local"


@dataclass
class ControllerState:
    """Everything the controller workflow knows; its input, carried across continue-as-new.

    `history`, `conditions` and `saga` hold status JSON exactly as the saga writes it.
    """

    run: RunRef
    stable: Deployment | None = None
    next_revision: int = 1
    handled_generation: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    saga: list[dict[str, Any]] = field(default_factory=list)
    phase: str = "Pending"
    pending: Desired | None = None
    retries: int = 0
