"""Bench (plnt.work/v1): one load test of a WorkflowRun's revisions, and its record in status.

`POST …/workflowruns/NAME/bench` takes a `Bench` whose `spec` says how long, how hard
(an open-loop `rate` or a closed-loop `concurrency`), with which inputs and against which
revision (`revision`, or `compare: [A, B]` side by side in one window). The answer (202)
and `GET …/bench` are the same kind: the bench's id in `metadata.name`, its request in
`spec`, and in `status` its phase, live progress and, once done, one result per revision.

Why a kind of its own and not a metav1.Status: a Status has no room for progress or
results, and `kubectl create --raw` / `kubectl get --raw` users read `.metadata.name` and
`.status.phase` the same way in both answers, as they do with autoscaling/v1 Scale.

A finished bench is also recorded in the run's `status.lastBench` (`BenchRecord`) and
`status.benchHistory` (the last `BENCH_HISTORY`). Each result is the harness's
`BenchResult` JSON (camelCase: latency percentiles, errors by class, steps, hops, cache,
GPU); it stays an open object here because the harness, not the wire layer, owns its
fields.

No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from plnt.api import names
from plnt.api.base import WireModel
from plnt.api.meta import ObjectMeta

API_VERSION = names.API_VERSION
KIND = names.BENCH_KIND
MAX_SECONDS = 3600.0
"""Longest measured phase (and longest warm-up): an hour."""
MAX_CONCURRENCY = 1000
MAX_RATE = 100_000.0
MAX_TIMEOUT_SECONDS = 300.0
MAX_INPUTS = 1000
MAX_INPUT_BYTES = 256 * 1024
"""The inputs travel in the bench workflow's history: kept well under Temporal's blob limit."""
DEFAULT_CONCURRENCY = 8
"""The load when the request names neither a rate nor a concurrency."""
BENCH_HISTORY = 5
"""Benches kept in `status.benchHistory`."""

Selector = str | int
"""A revision: "stable" (the promoted one), "canary" (the other one taking traffic), or N."""
SELECTOR_WORDS = ("stable", "canary")
BenchPhase = Literal["Pending", "Running", "Succeeded", "Failed"]
BenchCache = Literal["bypass", "use"]
"""Whether the bench's calls may use the runners' step cache (`plnt.api.headers`)."""


def selector(value: Any) -> Selector:
    """A revision selector from the wire ("stable", "canary", N, or "N"); a kube-worded
    `FieldValueNotSupported` for anything else."""
    if isinstance(value, bool):
        pass  # JSON true is not revision 1
    elif isinstance(value, int) and value >= 1:
        return value
    elif isinstance(value, str):
        if value in SELECTOR_WORDS:
            return value
        if value.isdigit() and int(value) >= 1:
            return int(value)
    shown = f'"{value}"' if isinstance(value, str) else str(value).lower()
    raise PydanticCustomError(
        "FieldValueNotSupported",
        "Unsupported value: {shown}: supported values: "
        '"stable", "canary", or a revision number (1 or more)',
        {"shown": shown},
    )


class BenchSpec(WireModel):
    """What to measure, how long and how hard."""

    duration_seconds: float = Field(
        default=10.0,
        gt=0,
        le=MAX_SECONDS,
        description="Length of the measured phase.",
    )
    warmup_seconds: float = Field(
        default=0.0,
        ge=0,
        le=MAX_SECONDS,
        description="Load sent before the measured phase and not recorded.",
    )
    rate: float | None = Field(
        default=None,
        gt=0,
        le=MAX_RATE,
        description="Open loop: requests started per second whatever the server does.",
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENCY,
        description=(
            f"Closed loop: requests in flight (default {DEFAULT_CONCURRENCY} when no rate)."
        ),
    )
    inputs: dict[str, Any] | list[dict[str, Any]] | None = Field(
        default=None,
        description=(
            "The workflow's inputs: one object, or a list cycled in order. Default: the"
            " run's smoke inputs (spec.canary.smoke.input, else the workflow's smoke case)."
        ),
    )
    revision: Selector | None = Field(
        default=None,
        description='"stable" (default), "canary", or a revision number that takes traffic.',
    )
    compare: list[Selector] | None = Field(
        default=None,
        min_length=2,
        max_length=2,
        description="Two revisions measured side by side in the same window.",
    )
    timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=MAX_TIMEOUT_SECONDS,
        description="Per-request timeout.",
    )
    stream: bool | None = Field(
        default=None,
        description=(
            "Ask each invocation for its NDJSON stream (`/invoke?stream=true`), so the results"
            " carry time to first token and tokens per second of the workflow's model step."
        ),
    )
    cache: BenchCache = Field(
        default="bypass",
        description=(
            '"bypass" (default): every call asks the runners not to use their step cache'
            " (`Cache-Control: no-cache`), so a few inputs sent again and again measure the"
            ' model, not the cache; "use": the cache answers what it holds, to measure it.'
        ),
    )

    @field_validator("revision", mode="before")
    @classmethod
    def _revision(cls, value: Any) -> Any:
        return None if value is None else selector(value)

    @field_validator("compare", mode="before")
    @classmethod
    def _compare(cls, value: Any) -> Any:
        if isinstance(value, str):  # "1,2", as the CLI's flag reads
            value = [part.strip() for part in value.split(",")]
        if isinstance(value, list):
            return [selector(item) for item in value]
        return value

    @field_validator("inputs", mode="after")
    @classmethod
    def _inputs(cls, value: Any) -> Any:
        if isinstance(value, list) and not 1 <= len(value) <= MAX_INPUTS:
            raise PydanticCustomError(
                "FieldValueInvalid",
                "Invalid value: {count} items: must name between 1 and {most} input objects",
                {"count": len(value), "most": MAX_INPUTS},
            )
        return value

    def selectors(self) -> list[Selector]:
        """The revisions to measure, in the order of the results."""
        if self.compare:
            return list(self.compare)
        return [self.revision if self.revision is not None else "stable"]

    def input_list(self) -> list[dict[str, Any]] | None:
        if self.inputs is None:
            return None
        return self.inputs if isinstance(self.inputs, list) else [self.inputs]


class BenchTarget(WireModel):
    """One revision a bench measures, and the path its requests took."""

    label: str = Field(description='The selector as asked: "stable", "canary" or "N".')
    revision: int
    url: str | None = Field(default=None, description="The invoke URL the harness called.")
    path: str | None = Field(
        default=None,
        description=(
            'What was measured: "runner" (the revision\'s runner /invoke, directly, without'
            " the API server in the path)."
        ),
    )
    replicas: int | None = Field(
        default=None, description="Ready replicas of the revision; one of them was measured."
    )
    cache: BenchCache | None = Field(
        default=None,
        description='"bypass": the step cache was not used, "use": it was (spec.cache).',
    )


class BenchProgress(WireModel):
    """A running snapshot of one revision's measured phase."""

    label: str
    elapsed_seconds: float
    requests: int
    errors: int
    p50_ms: float
    p99_ms: float


class BenchStatus(WireModel):
    """What the bench is doing, or what it measured."""

    phase: BenchPhase = "Pending"
    targets: list[BenchTarget] = Field(default_factory=list)
    attempt: int | None = Field(
        default=None, description="The measurement attempt (a lost worker starts it again)."
    )
    restarts: int = Field(
        default=0, description="Measurements started again after the worker running one died."
    )
    progress: list[BenchProgress] | None = Field(
        default=None, description="While running: one snapshot per revision."
    )
    results: list[dict[str, Any]] | None = Field(
        default=None,
        description="When done: the harness's result per revision, in `targets` order.",
    )
    message: str | None = None
    start_time: str | None = None
    completion_time: str | None = None


class Bench(WireModel):
    """A bench of a WorkflowRun: the body of `POST …/bench` and the answer of both verbs."""

    api_version: Literal["plnt.work/v1"] = "plnt.work/v1"
    kind: Literal["Bench"] = "Bench"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: BenchSpec = Field(default_factory=BenchSpec)
    status: BenchStatus | None = None


class BenchRecord(WireModel):
    """A finished bench as the run's status keeps it (`lastBench`, `benchHistory`)."""

    id: str
    phase: Literal["Succeeded", "Failed"]
    spec: dict[str, Any] | None = Field(
        default=None, description="The bench's spec (inputs left out)."
    )
    targets: list[BenchTarget] = Field(default_factory=list)
    results: list[dict[str, Any]] = Field(
        default_factory=list, description="The harness's result per revision."
    )
    restarts: int = 0
    message: str = ""
    start_time: str | None = None
    completion_time: str | None = None


RECORD_STATUS = (
    "phase",
    "targets",
    "results",
    "restarts",
    "message",
    "startTime",
    "completionTime",
)
"""The fields of a `BenchRecord` that a Bench's status shows as they are."""


def status_of_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A Bench's status from a finished bench's record (`status.lastBench`'s shape)."""
    return {key: record[key] for key in RECORD_STATUS if key in record}


def from_record(record: Mapping[str, Any], *, namespace: str | None) -> dict[str, Any]:
    """A finished bench's record (`status.lastBench`, or an item of `status.benchHistory`)
    as the Bench `GET …/bench` answers: its id for a name, its start for a creation time."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": record["id"],
            "namespace": namespace,
            "creationTimestamp": record.get("startTime"),
        },
        "spec": record.get("spec") or {},
        "status": status_of_record(record),
    }
