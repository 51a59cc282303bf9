"""The deploy saga benchmark runs end to end with tiny numbers and prints every result.

Nothing here asserts a speed (DESIGN.md §5): the test only proves that `python -m
plnt.bench saga` starts its Temporal and `plnt up`, deploys, invokes through the API,
directly and through both floors (the bare proxy over plain HTTP and over TLS), reports,
and leaves no process behind. The report's arithmetic is checked on made-up stats, not
on measured ones.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from plnt.bench import deploys, saga, starts
from plnt.bench.runner_starts import RunnerStarts
from tests.support.processes import live_processes

REPO = Path(__file__).resolve().parents[2]
TINY = [
    *("--deploys", "2", "--concurrency", "2", "--duration", "0.5", "--warmup", "0.1"),
    *("--runner-starts", "2"),
    *("--creates", "6", "--create-concurrency", "3", "--create-rounds", "1", "--own-core"),
]


def test_benchmark_bursts_deploys_invokes_through_api_direct_and_both_floors_and_prints_all(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its state dir lands here: findable below
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "saga", *TINY, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    printed = json.loads(lines[-1])
    assert printed == json.loads(out.read_text())
    assert printed["deploy"]["count"] == 2
    assert 0 < printed["signature_pull_p50_ms"] <= printed["signature_pull_p95_ms"]
    assert {"p50_s", "p95_s", "max_s", "first_s", "saga_share_p50_s"} <= set(printed["deploy"])
    for way in ("executed", "forked"):
        assert printed["runner_start"][way]["count"] == 2
        assert 0 < printed["runner_start"][way]["p50_s"] <= printed["runner_start"][way]["max_s"]
    invoke = printed["invoke"]
    assert {
        "throughput_ratio",
        "overhead_p50_ms",
        "concurrent_overhead_p50_ms",
        "bare_throughput_ratio",
        "bare_overhead_p50_ms",
        "bare_tls_throughput_ratio",
        "bare_tls_overhead_p50_ms",
        "own_share_p50_ms",
    } <= set(invoke)
    assert invoke["own_share_floor"] == "bare_tls"
    for path in ("api", "direct", "bare", "bare_tls"):
        for phase in (path, f"{path}_sequential"):
            assert invoke[phase]["ops"] >= 1 and invoke[phase]["errors"] == 0, (phase, invoke)
    creates = printed["creates"]
    # The burst ran with Temporal alone on the first core.
    first, *rest = sorted(os.sched_getaffinity(0))
    split = f"temporal on core {first}, the rest on {','.join(map(str, rest))}"
    assert creates["cores"] == split and f"cores: {split}" in lines
    assert [r["label"] for r in creates["floors"]] == ["bare starts r1", "bare starts r2"]
    assert [r["label"] for r in creates["plnt"]] == ["plnt creates r1"]
    for burst in (*creates["floors"], *creates["plnt"]):
        # Every answer acknowledged a start, and Temporal lists each started workflow.
        assert (burst["started"], burst["deferred"], burst["errors"]) == (6, 0, 0), burst
        assert burst["listed"] == 6, burst
        assert {"temporal", "plnt up", "etcd", "generator"} <= set(burst["cpu_ms_per_item"])
    assert any(line.startswith("ratio creates/bare starts") for line in lines)
    cpu = [line.split()[1:3] for line in lines if line.startswith("cpu/req ")]
    assert cpu == [["create/start", "plnt"], ["invoke", "c=2"], ["invoke", "c=1"]], lines
    assert creates["cpu"]["plnt_ms"] > 0 and creates["cpu"]["floor_ms"] > 0, creates["cpu"]
    for key in ("wide", "sequential"):
        row = invoke["cpu"][key]
        # plnt up proxied calls and the runner (found by its port) answered direct ones.
        assert row["plnt_ms"] > 0 and row["floor_ms"] > 0, row
        assert {"bare proxy per call", "bare tls per call"} <= set(row["beside_ms"])
    for phase in ("api", "direct", "bare", "bare_tls"):
        assert {"plnt up", "runner", "etcd", "generator"} <= set(invoke[phase]["cpu_ms_per_req"])
    assert any(line.startswith("apply -> Ready") for line in lines)
    assert {"runner start executed", "runner start forked"} <= {line[:22].strip() for line in lines}
    assert any(
        re.fullmatch(rf"floor: forked/executed runner start p50 +{NUMBER}", line) for line in lines
    )
    assert any(line.startswith("ratio invoke api/direct") for line in lines)
    assert any(line.startswith("overhead p50 c=1") for line in lines)
    labels = {line[:22].strip() for line in lines}
    for label in ("api", "direct", "bare proxy", "bare tls"):
        assert {f"{label} c=2", f"{label} c=1"} <= labels
    assert_floor_lines(lines)
    assert live_processes(str(tmp_path)) == set()


NUMBER = r"-?\d+\.\d\d"
FLOOR_LINES = (
    rf"floor: bare proxy/direct +{NUMBER}, overhead p50 c=1 +{NUMBER} ms "
    r"\(plain HTTP, no TLS, no middleware\)",
    rf"floor: bare proxy over TLS/direct +{NUMBER}, overhead p50 c=1 +{NUMBER} ms "
    r"\(TLS, no middleware\)",
    rf"plnt's own share p50 c=1: api - bare tls = {NUMBER} ms",
)


def assert_floor_lines(lines: list[str]) -> None:
    """Both floor lines and the share line are printed once each, in this order."""
    found = [
        next(i for i, line in enumerate(lines) if re.fullmatch(pattern, line))
        for pattern in FLOOR_LINES
    ]
    assert found == sorted(found), lines


def test_the_saga_share_is_apply_to_ready_above_a_forked_runner_start() -> None:
    starts = RunnerStarts(executed=[0.8, 0.7, 0.9], forked=[0.05, 0.04, 0.06])
    results = saga.SagaResults(deploy_seconds=[0.6, 0.5, 0.7], runner_starts=starts)
    lines = saga.report(results, saga.InvokeSettings())
    assert "floor: forked/executed runner start p50  0.06" in lines
    assert lines[-1] == "saga's own share p50: apply -> Ready - forked runner start = 0.550 s"
    document = saga.as_json(results, saga.InvokeSettings())
    assert document["runner_start"]["executed"]["p50_s"] == pytest.approx(0.8)
    assert document["deploy"]["saga_share_p50_s"] == pytest.approx(0.55)


def stats(*, ops: int, p50_ms: float) -> saga.PhaseStats:
    return saga.PhaseStats(ops=ops, elapsed=1.0, latencies=[p50_ms / 1000.0] * 3)


def test_each_floor_is_reported_against_direct_and_the_closest_floor_takes_plnts_share() -> None:
    invoke = saga.InvokeResults(
        api=stats(ops=600, p50_ms=10.0),
        direct=stats(ops=1000, p50_ms=5.0),
        api_sequential=stats(ops=300, p50_ms=3.0),
        direct_sequential=stats(ops=700, p50_ms=1.0),
        floors=[
            saga.FloorStats(saga.BARE, stats(ops=900, p50_ms=6.0), stats(ops=500, p50_ms=2.0)),
            saga.FloorStats(saga.BARE_TLS, stats(ops=800, p50_ms=7.0), stats(ops=400, p50_ms=2.5)),
        ],
    )
    results = saga.SagaResults(deploy_seconds=[1.0], invoke=invoke, endpoint="http://x")
    settings = saga.InvokeSettings(concurrency=16)
    lines = saga.report(results, settings)
    assert_floor_lines(lines)
    assert {"bare proxy c=16", "bare tls c=16", "bare proxy c=1", "bare tls c=1"} <= {
        line[:22].strip() for line in lines
    }
    document = saga.as_json(results, settings)["invoke"]
    assert (document["bare_tls"]["ops"], document["bare_tls_sequential"]["ops"]) == (800, 400)
    assert document["bare_throughput_ratio"] == pytest.approx(0.9)
    assert document["bare_tls_throughput_ratio"] == pytest.approx(0.8)
    assert document["bare_tls_overhead_p50_ms"] == pytest.approx(1.5)
    assert (document["own_share_floor"], document["own_share_p50_ms"]) == (
        "bare_tls",
        pytest.approx(0.5),
    )
    assert lines[-3] == "plnt's own share p50 c=1: api - bare tls = 0.50 ms"
    # No CPU readings in made-up stats: the rows are printed with unknowns, never dropped.
    assert [line.split()[1:3] for line in lines[-2:]] == [["invoke", "c=16"], ["invoke", "c=1"]]
    assert "plnt - ms, floor - ms, ratio - (no target)" in lines[-1]


def test_ready_means_the_ready_condition_is_true_for_the_current_generation() -> None:
    ready = {"type": "Ready", "status": "True"}
    obj = {
        "metadata": {"generation": 2},
        "status": {"observedGeneration": 2, "conditions": [ready]},
    }
    stale = {"metadata": {"generation": 3}, "status": obj["status"]}
    not_ready = {
        "metadata": {"generation": 1},
        "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "False"}]},
    }
    assert deploys.is_ready(obj)
    assert not deploys.is_ready(stale)
    assert not deploys.is_ready(not_ready)
    assert not deploys.is_ready({"metadata": {"generation": 1}})


def test_runner_endpoint_is_the_first_endpoint_of_the_first_traffic_target() -> None:
    obj = {"status": {"traffic": [{"endpoints": ["http://127.0.0.1:9/", "http://x"]}]}}
    assert deploys.runner_endpoint(obj) == "http://127.0.0.1:9"


def burst(label: str, *, started: int, elapsed: float) -> starts.BurstStats:
    return starts.BurstStats(
        label, started=started, elapsed=elapsed, start_latencies=[0.1] * started
    )


def test_the_create_ratio_is_plnts_mean_started_rate_over_the_floors_and_warned_do_not_count() -> (
    None
):
    results = starts.BurstResults(starts.BurstSettings(count=100, concurrency=10, rounds=1))
    results.floors = [
        burst("bare r1", started=100, elapsed=1.0),
        burst("bare r2", started=100, elapsed=2.0),
    ]
    plnt = burst("plnt r1", started=60, elapsed=1.0)
    plnt.deferred = 40  # answered with a Warning: stored, not started
    results.plnt = [plnt]
    results.rounds = [results.floors[0], plnt, results.floors[1]]
    assert results.floor_rate == pytest.approx(75.0)
    assert results.ratio == pytest.approx(0.8)
    plnt.cpu_ms = {"plnt up": 6.0, "temporal": 9.0, "etcd": 2.0}
    results.floors[0].cpu_ms = {"temporal": 7.0}
    results.floors[1].cpu_ms = {"temporal": 9.0}
    lines = starts.report(results)
    assert lines[1] == "cores: shared by every process"
    assert lines[-2].startswith("ratio creates/bare starts  0.80  (60.0 vs 75.0 started/s")
    assert lines[-2].endswith("MISS")
    # plnt up's CPU per create over Temporal's per bare start (mean of the floor rounds).
    assert "plnt 6.000 ms, floor 8.000 ms, ratio 0.75 (no target)" in lines[-1]
    assert "Temporal during plnt's rounds 9.000 ms, etcd during plnt's rounds 2.000 ms" in lines[-1]
    assert starts.as_json(results)["cpu"]["ratio"] == pytest.approx(0.75)
    assert starts.as_json(results)["plnt"][0]["deferred"] == 40


async def test_a_burst_sends_each_item_once_and_sorts_answers_started_deferred_failed() -> None:
    seen: list[int] = []

    async def operation(index: int) -> starts.Answer:
        seen.append(index)
        return index % 5 != 0, index % 5 == 1

    stats = await starts.burst("x", operation, starts.BurstSettings(count=20, concurrency=4))
    assert sorted(seen) == list(range(20))
    assert (stats.started, stats.deferred, stats.errors) == (12, 4, 4)
    assert len(stats.start_latencies) == 12


def test_the_quality_gates_time_is_reported_in_total_and_per_case() -> None:
    results = saga.SagaResults(
        deploy_seconds=[1.0, 1.2], evaluation_ms=[100.0, 120.0, 110.0], evaluation_cases=10
    )
    lines = saga.report(results, saga.InvokeSettings())
    gate = next(line for line in lines if line.startswith("quality gate (10 cases"))
    assert "p50 110.0 ms" in gate and "per case p50 11.00 ms" in gate
    document = saga.as_json(results, saga.InvokeSettings())
    assert document["evaluation"]["per_case_p50_ms"] == pytest.approx(11.0)
    run = deploys.workflowrun("r", ref="oci-layout:x:y", digest="d", evaluation_cases=2)
    cases = run["spec"]["canary"]["evaluation"]["cases"]
    assert [c["name"] for c in cases] == ["topic-0", "topic-1"]
    ready = {"status": {"lastEvaluation": {"durationMilliseconds": 12.5}}}
    assert saga.evaluation_milliseconds(ready) == 12.5
    assert saga.evaluation_milliseconds({"status": {}}) is None
