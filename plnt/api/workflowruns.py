"""WorkflowRun (plnt.work/v1): one deployed, canaried, pinned workflow.

The spec says what to run and where; the status is written only through the
status subresource (by the saga) and records what actually happened.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from plnt.api import names
from plnt.api.base import WireModel
from plnt.api.bench import BENCH_HISTORY, BenchRecord
from plnt.api.evaluations import CanaryEvaluation, EvaluationRecord
from plnt.api.meta import Condition, LabelSelector, ObjectMeta
from plnt.api.shadows import CanaryShadow, ShadowWindow
from plnt.api.slo import ServiceLevelObjectives, SLOStatus

GROUP = names.GROUP
VERSION = names.VERSION
API_VERSION = names.API_VERSION
KIND = names.WORKFLOWRUN_KIND

# The names the API server and the deploy saga agree on (both sides import them from here).
TEARDOWN_FINALIZER = "plnt.work/teardown"
"""Removed by the deploy saga once the run's runners are torn down."""

ROLLBACK_TO_ANNOTATION = "plnt.work/rollback-to"
"""Set by `/rollback`: the revision the new generation returns to."""

ROLLBACK_GENERATION_ANNOTATION = "plnt.work/rollback-generation"
"""Set by `/rollback`: the generation that rollback produced (later edits are not rollbacks)."""

Phase = Literal[
    "Pending",
    "Pulling",
    "Resolving",
    "Deploying",
    "SmokeTesting",
    "Promoting",
    "Ready",
    "RollingBack",
    "Degraded",
    "Failed",
]


class KeyFile(WireModel):
    """A PEM file on the worker (standalone); in a cluster, name a trusted signer instead."""

    file: str = Field(min_length=1, description="Path of the PEM file on the worker.")


class SignatureVerification(WireModel):
    """Who must have signed the spec (and the evaluation dataset) before anything runs.

    Exactly one of `signer` (one the server and worker trust: `--trusted-signer`, the
    chart's `signing.signers`), `publicKey`, or `ca` with `identity`. Where the cluster
    requires signatures, only `signer` is accepted. Checked offline by the pull.
    """

    signer: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="A signer the server and worker trust, by name (a key or a CA of theirs).",
    )
    public_key: KeyFile | None = Field(
        default=None, description="The EC public key that must have signed (standalone)."
    )
    ca: KeyFile | None = Field(
        default=None, description="The CA that must have issued the signing certificate."
    )
    identity: str | None = Field(
        default=None,
        min_length=1,
        description="With ca: the e-mail, URI or DNS name the signing certificate must carry.",
    )

    @model_validator(mode="after")
    def _one_root(self) -> SignatureVerification:
        roots = [self.signer, self.public_key, self.ca]
        if sum(root is not None for root in roots) != 1:
            raise ValueError("give exactly one of signer, publicKey and ca")
        if (self.ca is None) != (self.identity is None):
            raise ValueError("identity goes with ca, and ca needs it")
        return self


class WorkflowReference(WireModel):
    """Where the workflow spec lives and the digest it must have."""

    ref: str = Field(
        description=(
            "Location of the spec: oci://host[:port]/repo:tag, s3://bucket/key, "
            "or oci-layout:PATH:TAG (a relative PATH is a layout in the server's layout root)."
        ),
        min_length=1,
    )
    digest: str = Field(
        description="sha256:<64 hex> of the spec's exact bytes; the pull refuses anything else.",
        pattern=r"^sha256:[0-9a-f]{64}$",
    )
    verify: SignatureVerification | None = Field(
        default=None,
        description=(
            "Who must have signed the spec (and the evaluation dataset): the pull refuses "
            "an unsigned, tampered or untrusted one for good, before anything is installed."
        ),
    )


class BackendSelection(WireModel):
    """Which PlntBackend serves model steps: a name, or a selector for capacity-aware placement."""

    name: str | None = Field(default=None, description="Name of a PlntBackend in the namespace.")
    selector: LabelSelector | None = Field(
        default=None,
        description="Pick, among matching PlntBackends, the one with the most headroom.",
    )
    model: str | None = Field(default=None, description="Model to request from the backend.")
    pool: str | None = Field(
        default=None,
        description="Place only on PlntBackends whose spec.pool is this pool.",
    )


class FallbackSelection(WireModel):
    """The PlntBackend that serves a run's model calls while its primary backend cannot.

    Used call by call, never as a switch: a call the primary sheds (its admission queue is
    full) or refuses with an open circuit breaker goes to this backend instead, and its
    answer says so (`X-Plnt-Fallback`, `"fallback"`). Typically a smaller model.
    """

    name: str = Field(description="Name of a PlntBackend in the namespace.", min_length=1)
    model: str | None = Field(
        default=None, description="Model to request from it (default: its first model)."
    )


class SmokeTest(WireModel):
    """One invocation the canary must pass before promotion."""

    input: dict[str, Any] = Field(default_factory=dict, description="Inputs of the smoke call.")
    expect: dict[str, Any] | None = Field(
        default=None,
        description="Expectations on the output: equals, contains, or jsonSchema.",
    )


class CanaryAnalysis(WireModel):
    """Thresholds the canary must stay under while it takes traffic.

    The analysis benches the canary and the stable side by side in the same window.
    Without `rate` and `duration` it sends `requests` requests to each, four at a time (the
    original form); with `rate` it is an open-loop bench at that many requests/s for
    `duration` seconds (10 when unset), and with only `duration` a closed loop (four at a
    time) for that long: `requests` is then not used. `maxP95Ms` and `maxP95Milliseconds`
    are one limit under two names: when both are set the smaller applies.
    """

    requests: int = Field(
        default=20, ge=1, le=10000, description="Requests sent to the canary (and the stable)."
    )
    max_error_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Largest tolerated error ratio (0..1)."
    )
    max_p95_milliseconds: int | None = Field(
        default=None, ge=1, description="Largest tolerated 95th percentile latency in ms."
    )
    rate: float | None = Field(
        default=None,
        gt=0.0,
        le=5000.0,
        description="Open-loop bench: requests per second sent to the canary and the stable.",
    )
    duration: float | None = Field(
        default=None,
        gt=0.0,
        le=300.0,
        description="Seconds the bench runs (default 10 with `rate`).",
    )
    max_p95_ms: float | None = Field(
        default=None,
        gt=0.0,
        description="Largest tolerated 95th percentile latency in ms (maxP95Milliseconds too).",
    )
    min_cache_hit_rate: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Smallest tolerated step-cache hit ratio (0..1) over the bench.",
    )


class CanarySpec(WireModel):
    """How a new revision is introduced."""

    weight: int = Field(
        default=10, ge=0, le=100, description="Percent of traffic the canary receives."
    )
    smoke: SmokeTest | None = Field(
        default=None, description="The smoke case; default: the spec's."
    )
    analysis: CanaryAnalysis | None = None
    evaluation: CanaryEvaluation | None = Field(
        default=None,
        description=(
            "The quality gate: cases run on the canary and the stable in one window, scored,"
            " and held to per-scorer limits (after the analysis)."
        ),
    )
    shadow: CanaryShadow | None = Field(
        default=None,
        description=(
            "Shadow traffic: a share of live invocations answered by the stable is mirrored"
            " to the canary while it is under analysis, and the pairs are scored by the"
            " quality gate (needs evaluation)."
        ),
    )
    drain_seconds: int = Field(
        default=0,
        ge=0,
        le=3600,
        description=(
            "Seconds the previous revision keeps its replicas after promotion, so"
            " invocations it is serving finish before it is removed. 0: at once."
        ),
    )
    pause_seconds: int = Field(
        default=0,
        ge=0,
        le=86400,
        description=(
            "Seconds the canary keeps its weight of live invocations before promotion"
            " (after the analysis, if any). Skipped on a first deploy, which has no"
            " stable revision to share with. 0: promote at once."
        ),
    )


class StepCacheSpec(WireModel):
    """The runner's content-addressed step cache."""

    enabled: bool = Field(default=True, description="Whether step results are cached.")
    ttl_seconds: int = Field(default=600, ge=0, description="How long an entry stays valid.")
    max_entries: int = Field(default=1024, ge=0, description="Entries kept before eviction.")


class GatewayReference(WireModel):
    """The Gateway (gateway.networking.k8s.io/v1) a run's HTTPRoute attaches to."""

    name: str = Field(min_length=1, max_length=253, description="Name of the Gateway.")
    namespace: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        description="Namespace of the Gateway; default: the run's.",
    )
    section_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="One listener of the Gateway (its sectionName); default: every listener.",
    )


Hostname = Annotated[
    str,
    Field(
        min_length=1,
        max_length=253,
        pattern=r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    ),
]
"""A host name as the Gateway API's HTTPRoute takes it (a leading `*.` is a wildcard)."""


class RouteSpec(WireModel):
    """An HTTPRoute that sends applications' traffic to the run's revisions by the canary's weights.

    Only with `target: kubernetes`, on a worker that manages routes (`plnt worker --routes`,
    the chart's `worker.kubernetesTarget.routes.enabled`). Fields left out take the
    cluster's defaults (the worker's `--routes`); `enabled: false` opts a run out of a
    cluster that routes every run.
    """

    enabled: bool = Field(default=True, description="Whether the run has an HTTPRoute.")
    gateway: GatewayReference | None = Field(
        default=None, description="The Gateway to attach to; default: the cluster's."
    )
    hostnames: list[Hostname] | None = Field(
        default=None,
        max_length=16,
        description="Host names the route matches; default: the cluster's (none: the Gateway's).",
    )
    path: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        pattern=r"^/",
        description="Path prefix the route matches; default: the cluster's, else /.",
    )


class CallDefaults(WireModel):
    """What a call to the run gets when it does not say (docs/reliability.md)."""

    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="A call's deadline when the caller gives none (`?timeout=` or "
        "X-Plnt-Timeout-Ms); unset: the API server's invoke timeout.",
    )
    criticality: Literal["critical", "standard", "sheddable"] = Field(
        default="standard",
        description="A call's criticality when it sends no X-Plnt-Criticality: under "
        "overload sheddable calls are refused first and critical calls keep their share.",
    )


class WorkflowRunSpec(WireModel):
    """Desired state of a WorkflowRun."""

    workflow: WorkflowReference = Field(description="The pinned workflow spec to run.")
    backend: BackendSelection | None = Field(
        default=None, description="The inference backend for model steps."
    )
    fallback: FallbackSelection | None = Field(
        default=None,
        description="A PlntBackend that serves the calls the backend sheds or refuses while "
        "its circuit breaker is open; such answers are marked and counted.",
    )
    gpu_class: str | None = Field(default=None, description="GPU class the backend must offer.")
    replicas: int = Field(default=1, ge=0, le=1000, description="Runner replicas to keep ready.")
    target: Literal["local", "kubernetes"] = Field(
        default="local", description="Where runners run: local processes or a Kubernetes cluster."
    )
    canary: CanarySpec | None = Field(default=None, description="Canary settings.")
    cache: StepCacheSpec | None = Field(default=None, description="Step cache settings.")
    calls: CallDefaults | None = Field(
        default=None,
        description="A call's deadline and criticality when the caller names none.",
    )
    route: RouteSpec | None = Field(
        default=None,
        description=(
            "A Gateway API HTTPRoute carrying the canary's weights to applications in the"
            " cluster (target: kubernetes)."
        ),
    )
    slo: ServiceLevelObjectives | None = Field(
        default=None,
        description=(
            "Service-level objectives (time to first token, time per output token, latency,"
            " error rate, tokens per second, cost per million tokens) over a window: measured"
            " on live traffic into status.slo, held by the canary analysis and the bench,"
            " preferred by placement, and exported for burn-rate alerts."
        ),
    )


class SagaStep(WireModel):
    """One step of the deploy saga, as the timeline shows it."""

    name: str
    state: Literal["Pending", "Running", "Succeeded", "Failed", "Compensated", "Skipped"]
    attempts: int = 0
    start_time: str | None = None
    end_time: str | None = None
    message: str = ""


class RevisionRecord(WireModel):
    """A promoted revision that `/rollback` can return to."""

    revision: int
    digest: str
    ref: str | None = Field(default=None, description="The spec reference it was pulled from.")
    backend: str | None = None
    promoted_at: str | None = None
    reason: str | None = Field(
        default=None, description='Why it was deployed: "deploy" or "rollback to revision N".'
    )
    signed_by: str | None = Field(
        default=None,
        description="The signer the pull verified (spec.workflow.verify or the policy).",
    )


class TrafficTarget(WireModel):
    """One revision that takes invocations, its share, and where its replicas listen."""

    revision: int
    digest: str
    weight: int = Field(ge=0, le=100, description="Percent of invocations sent to it.")
    endpoints: list[str] = Field(
        default_factory=list, description="Base URLs of its ready runner replicas."
    )
    shadow: ShadowWindow | None = Field(
        default=None,
        description="On the canary under analysis: live calls to the stable are mirrored to it.",
    )


class WorkflowRunStatus(WireModel):
    """Observed state of a WorkflowRun; written only through the status subresource."""

    phase: Phase | None = Field(default=None, description="Coarse lifecycle phase.")
    observed_generation: int | None = Field(
        default=None,
        description="The generation the saga last reported on (absent on a new run).",
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description=(
            "Ready, Progressing and Degraded, with actionable reasons; Reconciling and"
            " Stalled (kstatus) only while true."
        ),
    )
    revision: int | None = Field(default=None, description="The promoted revision.")
    digest: str | None = Field(default=None, description="Digest of the promoted spec.")
    backend: str | None = Field(default=None, description="Backend of the promoted revision.")
    endpoint: str | None = Field(default=None, description="Stable URL of the promoted runner.")
    replicas: int | None = Field(default=None, description="Runner replicas that exist.")
    ready_replicas: int | None = Field(default=None, description="Runner replicas that are ready.")
    selector: str | None = Field(default=None, description="Label selector of the runners (scale).")
    history: list[RevisionRecord] | None = Field(default=None, description="Promoted revisions.")
    traffic: list[TrafficTarget] | None = Field(
        default=None, description="Revisions that take invocations, with their weights."
    )
    saga: list[SagaStep] | None = Field(default=None, description="The deploy saga's timeline.")
    last_bench: BenchRecord | None = Field(
        default=None, description="The last finished bench (`POST …/bench`)."
    )
    bench_history: list[BenchRecord] | None = Field(
        default=None,
        description=f"The last {BENCH_HISTORY} finished benches, oldest first (lastBench too).",
    )
    last_evaluation: EvaluationRecord | None = Field(
        default=None,
        description="The last quality gate (spec.canary.evaluation): scores against limits.",
    )
    slo: SLOStatus | None = Field(
        default=None,
        description="Attainment of spec.slo over its window from live traffic, the error "
        "budget left and the cost so far (written by the API server).",
    )


class WorkflowRun(WireModel):
    """A workflow deployed from a pinned spec to a backend, with canary and rollback."""

    api_version: Literal["plnt.work/v1"] = "plnt.work/v1"
    kind: Literal["WorkflowRun"] = "WorkflowRun"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: WorkflowRunSpec
    status: WorkflowRunStatus | None = None


class WorkflowRunRollback(WireModel):
    """Body of `POST …/workflowruns/{name}/rollback`: the revision to return to."""

    api_version: Literal["plnt.work/v1"] = "plnt.work/v1"
    kind: Literal["WorkflowRunRollback"] = "WorkflowRunRollback"
    to_revision: int | None = Field(
        default=None, ge=1, description="A revision in status.history; default: the previous one."
    )
