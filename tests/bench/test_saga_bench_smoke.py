"""The deploy saga benchmark runs end to end with tiny numbers and prints every result.

Nothing here asserts a speed (DESIGN.md §5): the test only proves that the script
starts its Temporal and `plnt up`, deploys, invokes both ways, reports, and leaves no
process behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from plnt.bench import saga
from tests.support.processes import live_processes

REPO = Path(__file__).resolve().parents[2]
TINY = ["--deploys", "2", "--concurrency", "2", "--duration", "0.5", "--warmup", "0.1"]


def test_benchmark_deploys_invokes_both_ways_and_prints_every_result(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # its state dir lands here: findable below
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "saga.py"), *TINY, "--json", str(out)],
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
    assert {"p50_s", "p95_s", "max_s", "first_s"} <= set(printed["deploy"])
    invoke = printed["invoke"]
    assert {
        "throughput_ratio",
        "overhead_p50_ms",
        "concurrent_overhead_p50_ms",
        "bare_throughput_ratio",
        "bare_overhead_p50_ms",
    } <= set(invoke)
    phases = ("api", "direct", "bare", "api_sequential", "direct_sequential", "bare_sequential")
    for phase in phases:
        assert invoke[phase]["ops"] >= 1 and invoke[phase]["errors"] == 0, (phase, invoke)
    assert any(line.startswith("apply -> Ready") for line in lines)
    assert any(line.startswith("ratio invoke api/direct") for line in lines)
    assert any(line.startswith("overhead p50 c=1") for line in lines)
    assert any(line.startswith("floor: bare proxy/direct") for line in lines)
    assert live_processes(str(tmp_path)) == set()


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
    assert saga.is_ready(obj)
    assert not saga.is_ready(stale)
    assert not saga.is_ready(not_ready)
    assert not saga.is_ready({"metadata": {"generation": 1}})


def test_runner_endpoint_is_the_first_endpoint_of_the_first_traffic_target() -> None:
    obj = {"status": {"traffic": [{"endpoints": ["http://127.0.0.1:9/", "http://x"]}]}}
    assert saga.runner_endpoint(obj) == "http://127.0.0.1:9"
