"""What the metric sources make of their inputs, without servers: the bench gauges from
`status.lastBench`, the worker's step and deploy figures from the saga's reports, and the
local target's SD groups."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import generate_latest

from plnt.api.meta import format_time
from plnt.apiserver.workflowruns.benchgauges import BenchGauges
from plnt.sagas import activitynames
from plnt.sagas import values as v
from plnt.sagas.metrics import SagaMetrics
from plnt.sagas.targets import interface, local_scrape
from plnt.sagas.targets.local_records import ReplicaRecord

RUN = v.RunRef(namespace="ns", name="chat", uid="u-1")


def result(label: str, **extra: Any) -> dict[str, Any]:
    latency = {"count": 10, "p50Ms": 5.0, "p90Ms": 8.0, "p95Ms": 9.0, "p99Ms": 12.0}
    return {
        "label": label,
        "requests": 10,
        "achievedRate": 99.5,
        "requestedRate": None,
        "latency": {**latency, "maxMs": 20.0, "meanMs": 6.0},
        "errorRate": 0.1,
        "cacheHitRate": None,
        "gpuUtilization": None,
        **extra,
    }


def run(last_bench: Any, name: str = "chat") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name}, "status": {"lastBench": last_bench}}


def exposition(gauges: BenchGauges) -> str:
    return "\n".join(
        f"{s.name}{dict(sorted(s.labels.items()))} {s.value}"
        for family in gauges.collect()
        for s in family.samples
    )


def test_bench_gauges_export_each_result_and_leave_out_what_was_not_measured() -> None:
    gauges = BenchGauges()
    record = {
        "id": "b1",
        "phase": "Succeeded",
        "results": [result("1"), result("2", cacheHitRate=0.5)],
    }
    gauges.update(run(record))
    text = exposition(gauges)
    labels = "'namespace': 'ns', 'quantile': '0.99', 'revision': '1', 'workflowrun': 'chat'"
    assert f"plnt_bench_latency_seconds{{{labels}}} 0.012" in text
    assert "'quantile': '1', 'revision': '2'" in text  # the maximum
    assert "'kind': 'achieved'" in text and "'kind': 'requested'" not in text
    cache = [line for line in text.splitlines() if line.startswith("plnt_bench_cache_hit_ratio")]
    assert len(cache) == 1 and "'revision': '2'" in cache[0] and cache[0].endswith(" 0.5")
    assert "plnt_bench_gpu_utilization_ratio{" not in text
    gauges.update(run(None))  # a run whose status no longer has a bench
    assert "plnt_bench_latency_seconds{" not in exposition(gauges)


def test_a_single_result_is_read_too_and_a_deleted_run_is_forgotten() -> None:
    gauges = BenchGauges()
    gauges.update(run(result("stable", gpuUtilization=25.0)))  # percent, as DCGM reports
    [gpu] = [line for line in exposition(gauges).splitlines() if "gpu_utilization_ratio{" in line]
    assert gpu.endswith(" 0.25")  # a ratio, as its name and the dashboard's unit say
    gauges.forget(run(None))
    assert exposition(gauges).count("{") == 0


def step(name: str, state: str, start: str | None, end: str | None = None) -> dict[str, Any]:
    return {"name": name, "state": state, "attempts": 1, "startTime": start, "endTime": end}


def report(
    saga: list[dict[str, Any]], reason: str | None = None, kind: str | None = None
) -> v.Report:
    return v.Report(run=RUN, status={"saga": saga}, event_type=kind, event_reason=reason)


def sample(metrics: SagaMetrics, name: str) -> float:
    for family in metrics.registry.collect():
        for s in family.samples:
            if f"{s.name}{dict(sorted(s.labels.items()))}" == name:
                return float(s.value)
    raise AssertionError(f"no sample {name}")


def test_saga_reports_become_step_durations_and_deploy_results() -> None:
    metrics = SagaMetrics()
    t0, t1 = "2025-01-01T00:00:00Z", "2025-01-01T00:00:03Z"
    metrics.observe_report(report([step("pull", "Running", t0)]))
    metrics.observe_report(report([step("pull", "Succeeded", t0, t1)]))
    metrics.observe_report(report([step("pull", "Succeeded", t0, t1)]))  # no second count
    count = "plnt_saga_step_duration_seconds_count{'outcome': 'succeeded', 'step': 'pull'}"
    assert sample(metrics, count) == 1
    # A start another worker saw: the timeline's own times, when the step just ended...
    now = datetime.now(UTC).replace(microsecond=0)
    began, ended = format_time(now - timedelta(seconds=3)), format_time(now)
    metrics.observe_report(report([step("smoke", "Failed", began, ended)]))
    total = "plnt_saga_step_duration_seconds_sum{'outcome': 'failed', 'step': 'smoke'}"
    assert sample(metrics, total) == 3.0
    # ...but not a step of an older deploy that this worker had never seen.
    metrics.observe_report(report([step("install", "Failed", t0, t1)]))
    old = "plnt_saga_step_duration_seconds_count{'outcome': 'failed', 'step': 'install'}"
    assert sample(metrics, old) == 0
    metrics.observe_report(report([], "Promoted", "Normal"))
    metrics.observe_report(report([], "RolledBack", "Warning"))
    metrics.observe_report(report([], "RolledBack", "Normal"))
    for result_ in ("promoted", "rolled_back", "interrupted"):
        assert sample(metrics, f"plnt_saga_deploys_total{{'result': '{result_}'}}") == 1
    assert b"plnt_saga_activity_retries_total" in generate_latest(metrics.registry)


def test_sd_groups_name_each_replica_with_its_run_and_revision() -> None:
    key = interface.RunRef(namespace="ns", name="chat", uid="u-1")
    record = ReplicaRecord(
        revision=3, index=1, token="t", port=4321, url="http://127.0.0.1:4321",
        spec="s", backend_config="b", fingerprint="f", log="l",
    )  # fmt: skip
    assert local_scrape.groups(key, [record]) == [
        {
            "targets": ["127.0.0.1:4321"],
            "labels": {
                "job": "plnt-runner",
                "namespace": "ns",
                "workflowrun": "chat",
                "revision": "3",
                "replica": "1",
            },
        }
    ]


def test_every_known_activity_series_exists_at_zero_before_any_activity_ran() -> None:
    """A series first scraped with its final count shows no increase to rate()."""
    metrics = SagaMetrics()
    for name in (
        activitynames.REPORT,
        activitynames.PULL_SPEC,
        activitynames.INSTALL,
        activitynames.TEARDOWN,
    ):
        for outcome in ("succeeded", "failed", "cancelled"):
            labels = f"{{'activity': '{name}', 'outcome': '{outcome}'}}"
            assert sample(metrics, f"plnt_saga_activity_duration_seconds_count{labels}") == 0
