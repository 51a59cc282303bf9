"""The Invocation benchmark runs end to end with tiny numbers and prints every ratio.

Nothing here asserts a speed: the test only proves that `python -m plnt.bench
invocations` starts its Temporal, `plnt up` and the bare worker, deploys, measures the
synchronous invoke, the durable Invocation at concurrency 1 and wide, bare Temporal
executions wide, and an API server's memory with finished Invocations cached, reports
the ratios, and leaves no process behind. The report's arithmetic is checked on made-up
stats.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from plnt.bench import invocations
from plnt.bench.apiserver import PhaseStats
from plnt.bench.settings import InvocationsBenchmarkSettings

REPO = Path(__file__).resolve().parents[2]
TINY = ["--concurrency", "2", "--duration", "0.5", "--warmup", "0.1", "--rss-objects", "20"]


def test_benchmark_compares_durable_with_sync_and_bare_temporal_and_prints_the_ratios(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "invocations", *TINY, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    printed = json.loads(lines[-1])
    assert printed == json.loads(out.read_text())
    for phase in ("sync", "durable", "durable_wide", "bare_wide"):
        assert printed[phase]["ops"] >= 1 and printed[phase]["errors"] == 0, (phase, printed)
    assert {"overhead_p50_ms", "overhead_p99_ms", "overhead_ratio_p50", "throughput_ratio"} <= set(
        printed
    )
    assert printed["rss"]["objects"] == 20 and printed["rss"]["loaded"] > 0
    assert any(line.startswith("overhead durable-sync p50") for line in lines)
    assert any(line.startswith("ratio invocations/bare temporal c=2") for line in lines)
    assert any(line.startswith("RSS api server") for line in lines)
    # Durable calls record their steps' ends (a call that ends before its recording left
    # leaves it to the SDK's heartbeat: fewer than one per call is possible, none is not).
    marks = printed["checkpoints"]
    assert marks["calls"] >= printed["durable"]["ops"] and marks["recorded"] >= 1, marks
    assert marks["seconds"] > 0 and marks["ms_each"] > 0, marks
    assert any(line.startswith("step-end recordings c=1") for line in lines)
    assert not list(tmp_path.glob("plnt-bench-invocations-*"))  # its directory removed


def test_the_report_gives_overheads_and_ratios_of_the_stats_it_is_given() -> None:
    results = invocations.InvocationResults(
        sync=PhaseStats(ops=4, elapsed=1.0, latencies=[0.010] * 4),
        durable=PhaseStats(ops=2, elapsed=1.0, latencies=[0.070, 0.070]),
        durable_wide=PhaseStats(ops=30, elapsed=1.0, latencies=[0.5] * 30),
        bare_wide=PhaseStats(ops=50, elapsed=1.0, latencies=[0.3] * 50),
        rss_objects=1000,
        rss_runs_bytes=100 * 2**20,
        rss_loaded_bytes=110 * 2**20,
        checkpoints=invocations.Checkpoints(calls=2, recorded=4, seconds=0.014),
    )
    lines = invocations.report(results, InvocationsBenchmarkSettings(concurrency=30))
    assert results.overhead_ms(0.5) == 60.0
    assert results.throughput_ratio == 0.6
    assert any("overhead durable-sync p50    60.00 ms" in line and "PASS" in line for line in lines)
    assert any("ratio invocations/bare temporal c=30  0.60" in line for line in lines)
    assert any("RSS per finished Invocation  10.24 KiB" in line for line in lines)
    assert any(
        "step-end recordings c=1   2.00 per Invocation,   3.50 ms each,   7.00 ms per Invocation"
        " (10.0% of the durable p50" in line
        for line in lines
    )


def test_the_recording_counters_are_read_from_the_metrics_text_and_subtracted() -> None:
    text = "\n".join(
        [
            "# HELP plnt_invocation_checkpoints_total Immediate recordings ...",
            "# TYPE plnt_invocation_checkpoints_total counter",
            "plnt_invocation_checkpoint_calls_total 12.0",
            "plnt_invocation_checkpoints_total 30.0",
            "plnt_invocation_checkpoints_created 1.7e9",
            "plnt_invocation_checkpoint_seconds_total 0.06",
        ]
    )
    later = invocations.checkpoints_of(text)
    assert later == invocations.Checkpoints(calls=12, recorded=30, seconds=0.06)
    change = later - invocations.Checkpoints(calls=2, recorded=10, seconds=0.02)
    assert (change.calls, change.recorded) == (10, 20)
    assert round(change.ms_each, 6) == 2.0 and change.per_call == 2.0
    assert invocations.checkpoints_of("") == invocations.Checkpoints()
