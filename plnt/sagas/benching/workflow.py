"""The bench workflow: one durable load test of a WorkflowRun's revisions.

`POST …/bench` starts `BenchWorkflow` (through `starter.TemporalDeployControl.start_bench`)
and answers at once; the workflow runs two activities (`benching.BenchActivities`):

1. `bench-measure` runs `plnt.harness.run` against the revisions' runners, heartbeating
   its progress every second. The heartbeat timeout is `HEARTBEAT_TIMEOUT`, so a worker
   that dies mid-bench is noticed within seconds and the activity is tried again on
   another (or the restarted) worker, up to `MEASURE_ATTEMPTS` attempts. A retried
   attempt finds the last progress of the lost one in its heartbeat details and
   **starts the measurement again**, warm-up included: the lost attempt's histograms
   died with its worker, and stitching a window around the gap would report a load the
   runners never saw. The result says how many times it restarted and where the lost
   attempt had got to.
2. `bench-report` writes `status.lastBench` and `status.benchHistory` and records the
   Event `BenchCompleted` (or `BenchFailed`) with the headline numbers.

Why the workflow id is the run's (`bench/NS/NAME/UID`) and the bench id only its input:
Temporal allows one running execution per workflow id, so "one bench at a time per run"
holds atomically across API server replicas and restarts, and the id without a run id
always names the current or last bench, which `GET …/bench` reads. A recreated run
(new uid) starts afresh.

Workflow code: deterministic, no I/O, no clock but `workflow.now()`. The dataclasses
here are the history's format: add fields only with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from plnt.sagas import values as v

HEARTBEAT_TIMEOUT = timedelta(seconds=6)
"""How long a measurement may go without a heartbeat before it counts as lost."""
MEASURE_ATTEMPTS = 3
NOT_MEASURABLE = "BenchNotMeasurable"
"""The error type of a bench that no retry can make (the run or the revision is gone)."""
MEASURE_ACTIVITY = "bench-measure"
REPORT_ACTIVITY = "bench-report"
BENCH_MEMO = "bench"
"""The memo key holding the Bench as the API server answered it (spec, targets, id)."""


def workflow_id(namespace: str, name: str, uid: str) -> str:
    """The bench workflow of one WorkflowRun (one execution per bench, one at a time)."""
    return f"bench/{namespace}/{name}/{uid}"


@dataclass
class TargetRef:
    """A revision to measure: the selector as asked ("stable", "canary", "3") and its number."""

    label: str
    revision: int


@dataclass
class BenchRequest:
    """The workflow's input: which run, which bench, what load, against which revisions."""

    run: v.RunRef
    bench_id: str
    spec: dict[str, Any]
    """The BenchSpec's wire JSON (camelCase), rate or concurrency filled in."""
    targets: list[TargetRef]
    start_time: str


@dataclass
class Measured:
    """What `bench-measure` returns: one harness result and one target record per revision."""

    results: list[dict[str, Any]]
    targets: list[dict[str, Any]]
    attempt: int = 1
    restarts: int = 0
    note: str = ""


@dataclass
class BenchReport:
    """What `bench-report` writes: the status record and the Event."""

    run: v.RunRef
    record: dict[str, Any]
    event_type: str
    event_reason: str
    event_message: str


@dataclass
class BenchOutcome:
    """The workflow's result: the record as written to `status.lastBench`."""

    record: dict[str, Any] = field(default_factory=dict)


def _ms(value: Any) -> str:
    number = float(value or 0.0)
    return f"{number:.1f} ms" if number < 100 else f"{number:.0f} ms"


def headline(result: dict[str, Any], target: dict[str, Any]) -> str:
    """`stable (revision 3): 812 req/s, p50 1.2 ms, p99 4.1 ms, 0 errors (0.00%)`."""
    label, revision = target.get("label"), target.get("revision")
    name = f"revision {revision}" if label == str(revision) else f"{label} (revision {revision})"
    latency = result.get("latency") or {}
    errors = sum(int(n) for n in (result.get("errors") or {}).values())
    rate = float(result.get("achievedRate") or 0.0)
    return (
        f"{name}: {rate:.0f} req/s, p50 {_ms(latency.get('p50Ms'))},"
        f" p99 {_ms(latency.get('p99Ms'))}, {errors} errors"
        f" ({100 * float(result.get('errorRate') or 0.0):.2f}%)"
    )


def _spec_of_record(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as status keeps it: the inputs are counted, not copied."""
    kept = {key: value for key, value in spec.items() if key != "inputs"}
    inputs = spec.get("inputs")
    if inputs is not None:
        kept["inputCount"] = len(inputs) if isinstance(inputs, list) else 1
    return kept


def _failure_text(error: ActivityError) -> str:
    cause = error.cause
    if isinstance(cause, ApplicationError):
        return cause.message
    if isinstance(cause, TimeoutError):
        return f"the measurement was lost {MEASURE_ATTEMPTS} times ({cause.message})"
    return str(cause or error)


@workflow.defn(name="Bench")
class BenchWorkflow:
    """Measure, then record (see the module docstring)."""

    @workflow.run
    async def run(self, request: BenchRequest) -> BenchOutcome:
        spec = request.spec
        seconds = float(spec.get("durationSeconds") or 0) + float(spec.get("warmupSeconds") or 0)
        record: dict[str, Any] = {
            "id": request.bench_id,
            "spec": _spec_of_record(spec),
            "targets": [{"label": t.label, "revision": t.revision} for t in request.targets],
            "startTime": request.start_time,
        }
        try:
            measured = await workflow.execute_activity(
                MEASURE_ACTIVITY,
                request,
                result_type=Measured,
                start_to_close_timeout=timedelta(seconds=seconds + 120),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_attempts=MEASURE_ATTEMPTS,
                    non_retryable_error_types=[NOT_MEASURABLE],
                ),
            )
        except ActivityError as error:
            message = f"bench {request.bench_id} failed: {_failure_text(error)}"
            record.update(phase="Failed", message=message, results=[])
            event = ("Warning", "BenchFailed", message)
        else:
            lines = [
                headline(r, t) for r, t in zip(measured.results, measured.targets, strict=False)
            ]
            message = f"bench {request.bench_id}: " + "; ".join(lines)
            if measured.note:
                message += f" ({measured.note})"
            record.update(
                phase="Succeeded",
                targets=measured.targets,
                results=measured.results,
                restarts=measured.restarts,
                message=message,
            )
            event = ("Normal", "BenchCompleted", message)
        record["completionTime"] = workflow.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        await workflow.execute_activity(
            REPORT_ACTIVITY,
            BenchReport(request.run, record, *event),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200),
                maximum_interval=timedelta(seconds=5),
                maximum_attempts=20,
            ),
        )
        return BenchOutcome(record)
