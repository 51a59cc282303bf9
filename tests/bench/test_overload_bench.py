"""`python -m plnt.bench overload`, briefly: it runs, prints its line and, guarded, sheds
instead of letting calls go late, with no more backend calls than admitted calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_overload_benchmark_sheds_at_four_times_capacity_without_amplification(
    tmp_path: Path,
) -> None:
    results = tmp_path / "overload.json"
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "plnt.bench",
            "overload",
            "--duration",
            "1",
            "--multipliers",
            "4",
            "--modes",
            "guarded",
            "--json",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert finished.returncode == 0, finished.stderr
    assert "goodput" in finished.stdout and "guarded" in finished.stdout
    (result,) = json.loads(results.read_text())
    assert result["shed"] > 0
    assert result["late_or_failed"] == 0
    assert result["answered_in_time"] > 0
    assert result["amplification"] <= 1.1
    assert result["recovery_seconds"] is not None
