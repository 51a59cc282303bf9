"""`python -m plnt.bench agents`, briefly: it runs its three comparisons against their floors
and reports what an agent did per call (4 turns, 3 tool calls with its scripted model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_agents_benchmark_compares_each_path_with_its_floor(tmp_path: Path) -> None:
    results = tmp_path / "agents.json"
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "plnt.bench",
            "agents",
            "--invocations",
            "2",
            "--json",
            str(results),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert finished.returncode == 0, finished.stderr
    printed = finished.stdout
    assert "runner time per turn p50" in printed
    assert "4-turn agent via API" in printed and "its calls made directly" in printed
    assert "forEach 16 x maxParallel 4" in printed and "4 waves direct" in printed
    measured = json.loads(results.read_text())
    assert (measured["turnsPerCall"], measured["toolCallsPerCall"]) == (4, 3)
    for key in ("agentThroughApiP50Ms", "agentFloorP50Ms", "mapP50Ms", "wavesP50Ms"):
        assert measured[key] > 0, key
