"""The shadow benchmark runs end to end with tiny numbers and reports one row per percent.

Nothing here asserts a speed (DESIGN.md §5): the test proves that `python -m plnt.bench
shadow`, its etcd, server and two runner children start, that each percent measured some
callers' calls, that the API server mirrored calls to the canary only when a window was
open, and that everything is cleaned up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TINY = ["--shadow-percents", "0,50,100", "--concurrency", "2", "--duration", "0.3",
        "--warmup", "0.05"]  # fmt: skip


def test_shadow_benchmark_reports_each_percent_with_ratios_to_the_unshadowed_row(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.json"
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "shadow", *TINY, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    rows = [line.split(":")[0] for line in lines if line.startswith("shadow") and "%:" in line]
    assert rows == ["shadow   0%", "shadow  50%", "shadow 100%"], result.stdout
    for line in lines[1:]:
        assert "p50 " in line and "p99 " in line and "(x" in line, line
    results = json.loads(out.read_text())
    assert [row["percent"] for row in results["rows"]] == [0, 50, 100]
    for row in results["rows"]:
        assert row["ops"] > 0 and row["errors"] == 0, row
        assert row["p50Ms"] > 0 and row["p99Ms"] >= row["p50Ms"], row
    unshadowed, half, full = results["rows"]
    assert (unshadowed["p50Ratio"], unshadowed["p99Ratio"]) == (1.0, 1.0)
    assert unshadowed["pairs"] == 0  # no window: nothing mirrored
    assert half["pairs"] > 0 and full["pairs"] > 0  # each window opened before its calls
