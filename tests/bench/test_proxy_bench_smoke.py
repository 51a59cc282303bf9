"""The proxy benchmark runs end to end with tiny numbers and prints its target lines.

Nothing here asserts a speed (DESIGN.md §5): the test proves that `python -m plnt.bench
proxy`, its etcd, server and runner children start, that every phase measured some calls
through the proxy and directly, and that everything is cleaned up.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = ["--concurrency", "2", "--duration", "0.3", "--sequential-duration", "0.3",
        "--warmup", "0.05", "--wrk-connections", "1,2"]  # fmt: skip


def test_proxy_benchmark_completes_and_prints_each_target_line(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "proxy", *TINY, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    targets = [" ".join(line.split()[:4]) for line in result.stdout.splitlines()
               if line.startswith(("ratio ", "overhead "))]  # fmt: skip
    assert targets == [
        "ratio chat throughput proxy/direct",
        "overhead chat p50 c=1",
        "overhead ttft p50 c=1",
    ]
    cpu = [line.split()[1:3] for line in result.stdout.splitlines() if line.startswith("cpu/req ")]
    python_rows = [["chat", "c=2"], ["chat", "c=1"], ["stream", "c=1"]]
    if shutil.which("wrk") is None:
        assert cpu == python_rows and "MISSING wrk is not installed" in result.stdout
    else:
        assert cpu == [*python_rows, ["wrk", "chat"], ["wrk", "chat"]], result.stdout
        runs = json.loads(out.read_text())["wrk"]["runs"]
        assert [(r["side"], r["connections"]) for r in runs] == [
            ("proxy", 1), ("direct", 1), ("proxy", 2), ("direct", 2)
        ]  # fmt: skip
        # Every chat wrk sent was answered: numbered questions, the token accepted.
        assert all(r["requests"] > 0 and r["errors"] == 0 for r in runs), runs
        row = json.loads(out.read_text())["wrk"]["cpu"]["chat c=1"]
        assert row["plnt_ms"] > 0 and row["floor_ms"] > 0, row
    results = json.loads(out.read_text())
    for key in ("chat", "chatSequential", "stream"):
        row = results["cpu"][key]
        # A server that proxied calls used CPU, and so did a runner answering direct ones.
        assert row["plnt_ms"] > 0 and row["floor_ms"] > 0 and row["target"] == 1.0, row
        assert "runner during plnt's phase" in row["beside_ms"], row
    for phase in ("proxy", "direct", "proxySequential", "directSequential"):
        assert results[phase]["ops"] > 0 and results[phase]["errors"] == 0, phase
        assert {"server", "runner", "etcd", "generator"} <= set(results[phase]["cpuMsPerRequest"])
    assert results["ttftP50Ms"]["proxy"] > 0 and results["ttftP50Ms"]["direct"] > 0


def test_workers_are_a_list_of_counts_and_each_count_is_compared_with_the_first() -> None:
    from plnt.bench import proxy

    settings, _ = proxy.parse_args(["--workers", "1,2"])
    assert settings.api_processes == (1, 2)
    one, two = proxy.ProxyResults(), proxy.ProxyResults()
    one.proxy.ops, one.proxy.elapsed, one.direct.ops, one.direct.elapsed = 100, 1.0, 300, 1.0
    two.proxy.ops, two.proxy.elapsed, two.direct.ops, two.direct.elapsed = 130, 1.0, 290, 1.0
    lines = proxy.api_process_ratios({1: one, 2: two})
    assert lines[0].startswith("proxied chats/s against --workers 1")
    assert "x1.30  (below target)" in lines[1] and "direct 290/s vs 300/s" in lines[1], lines


def test_a_worker_count_below_one_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "proxy", "--workers", "1,0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 2 and "--workers: each count must be at least 1" in result.stderr
