"""The API server benchmark runs end to end with tiny numbers and prints its ratio lines.

Nothing here asserts a speed: the benchmark reports ratios (DESIGN.md §5), and
this test only proves that `python -m plnt.bench apiserver`, its etcd and its server
child start, measure every phase and are cleaned up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plnt.bench import __main__ as bench_main
from plnt.bench import apiserver as harness
from plnt.bench import apiserver_command, settings

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--concurrency", "4", "--objects", "30", "--page", "10", "--duration", "0.2",
    "--warmup", "0.05", "--watchers", "3", "--watch-events", "5", "--watch-rate", "50",
    "--no-fsync",
]  # fmt: skip


def test_benchmark_completes_and_prints_every_ratio_line(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "apiserver", *TINY, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    ratio_lines = [line for line in result.stdout.splitlines() if line.startswith("ratio ")]
    names = [" ".join(line.split()[1:3]) for line in ratio_lines]
    assert names == [
        "GET api/raw",
        "GET api/bare",
        "CREATE api/raw",
        "CREATE api/bare",
        "LIST api/raw",
        "WATCH p99",
    ]
    lines = result.stdout.splitlines()
    cpu = [line.split()[1] for line in lines if line.startswith("cpu/req ")]
    wrk_rows = [" ".join(line.split()[2:4]) for line in lines if line.startswith("cpu/req wrk ")]
    if wrk_rows:  # the wrk phase ran (wrk installed): plnt against etcd's gateway at c=1, 16
        assert wrk_rows == ["GET c=1", "CREATE c=1", "GET c=16", "CREATE c=16"], result.stdout
    else:
        assert any(line.startswith("MISSING wrk is not installed") for line in lines)
    assert [name for name in cpu if name != "wrk"] == ["GET", "CREATE", "LIST"], result.stdout
    rss = [line for line in result.stdout.splitlines() if line.startswith("RSS api server")]
    assert len(rss) == 1 and "with 30 WorkflowRuns cached" in rss[0], result.stdout
    results = json.loads(out.read_text())
    assert results["rss"]["loaded"] > 0 and results["rss"]["started"] > 0
    assert results["watch"]["expected"] == 3 * 5
    assert {"get", "create", "list"} <= set(results["api"])
    for phase in ("get", "create", "list"):
        row = results["cpu"][phase]
        assert {"plnt_ms", "floor_ms", "ratio", "target", "beside_ms"} <= set(row), row
        # A server that answered requests used CPU, and so did etcd under raw requests.
        assert row["plnt_ms"] > 0 and row["floor_ms"] > 0, row
        assert {"server", "etcd", "generator"} <= set(results["api"][phase]["cpu_ms_per_req"])
    assert (results["cpu"]["get"]["target"], results["cpu"]["create"]["target"]) == (1.5, 3.0)


def test_workers_1_and_2_run_in_one_benchmark_and_print_their_ratio(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    argv = [*TINY, "--phases", "get", "--api-only", "--workers", "1,2", "--json", str(out)]
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "apiserver", *argv],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(pid " in result.stdout and ", 2 workers)" in result.stdout, result.stdout
    [ratio] = [line for line in result.stdout.splitlines() if "--workers 2:" in line]
    assert ratio.split()[0] == "get" and " x" in ratio, ratio
    runs = json.loads(out.read_text())["workers"]
    assert set(runs) == {"1", "2"} and all("get" in run["api"] for run in runs.values())


def test_a_worker_count_below_one_is_refused_before_anything_starts() -> None:
    with pytest.raises(SystemExit):
        apiserver_command.parse_args(["--workers", "1,0"])
    assert apiserver_command.parse_args(["--workers", "1,2"]).api_processes == (1, 2)


def test_continue_token_is_read_from_list_metadata_and_not_from_items() -> None:
    body = json.dumps(
        {
            "kind": "WorkflowRunList",
            "metadata": {"resourceVersion": "7", "continue": "abc"},
            "items": [{"metadata": {"continue": "not-this"}}],
        },
        separators=(",", ":"),  # the server's compact encoding
    ).encode()
    last = json.dumps(
        {"metadata": {"resourceVersion": "7"}, "items": [{"continue": "x"}]}, separators=(",", ":")
    ).encode()
    assert harness.continue_token(body) == "abc"
    assert harness.continue_token(last) is None


def test_percentile_uses_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert harness.percentile(values, 0.5) == 50.0
    assert harness.percentile(values, 0.99) == 99.0
    assert harness.percentile([], 0.99) == 0.0


def test_quick_takes_small_defaults_and_explicit_flags_still_win() -> None:
    quick = apiserver_command.parse_args(["--quick", "--objects", "7", "--phases", "get,list"])
    assert quick.objects == 7
    assert (quick.duration, quick.watchers) == (settings.QUICK.duration, settings.QUICK.watchers)
    assert quick.phases == {"get", "list"}
    full = apiserver_command.parse_args([])
    assert (full.objects, full.duration) == (10_000, 5.0)
    assert full.phases == set(settings.DEFAULT_API_PHASES)  # "reads" only when asked for
    assert full.get_objects == 0  # GET cycles over every object unless told
    assert apiserver_command.parse_args(["--get-objects", "100"]).get_objects == 100


def test_an_unknown_phase_is_refused_before_anything_starts() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "apiserver", "--phases", "get,delete"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 2
    assert "unknown delete" in result.stderr


def test_python_m_plnt_bench_names_its_commands_when_given_none_it_knows() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 2
    listed = result.stderr.split("{", 1)[1].split("}", 1)[0].split(",")
    assert sorted(listed) == sorted(bench_main.COMMANDS)  # every command, and only those


def test_the_deploys_report_gives_the_median_and_the_90th_percentile_by_nearest_rank() -> None:
    from plnt.bench import deploys_command

    text = deploys_command.report([float(n) for n in range(1, 11)], target="local")
    assert text.splitlines() == [
        "apply → Ready, target local, 10 deploys:",
        "  p50 5.00 s, p90 9.00 s, max 10.00 s",
    ]
