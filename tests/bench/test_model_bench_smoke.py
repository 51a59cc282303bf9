"""The model benchmark runs end to end with tiny counts and prints its ratio lines.

Nothing here asserts a speed: the test proves that `python -m plnt.bench model` starts the
model cold (its own server: the cold start is what it measures), etcd, the API server, a
runner and the two bare relays, that every path streamed tokens at both concurrencies, that
the cold start is split into its four parts, and that no child outlives it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from plnt.processes import modelserver
from tests.support.processes import live_processes

REPO = Path(__file__).resolve().parents[2]


def test_the_model_benchmark_prints_the_cold_start_split_and_the_ratios_through_plnt(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.json"
    result = subprocess.run(
        [sys.executable, "-m", "plnt.bench", "model", "--requests", "1", "--tokens", "4",
         "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    cold = [line for line in lines if line.startswith("cold start to first token")]
    assert len(cold) == 1
    for part in ("weights assembly", "verification", "server load", "first request"):
        assert part in cold[0]
    ratios = [" ".join(line.split()[:3]) for line in lines if line.startswith("ratio ")]
    assert ratios == [
        f"ratio {path}/direct c={c}:"
        for c in (1, 4)
        for path in ("relay", "runner", "relays", "proxy", "invoke")
    ]
    owns = [" ".join(line.split()[:5]) for line in lines if line.startswith("own ")]
    assert owns == [
        f"own {path} over {floor} c={c}:"
        for c in (1, 4)
        for path, floor in (("runner", "relay"), ("proxy", "relays"))
    ]
    assert all("% of direct" in line and "tok/s ratio" in line for line in lines if "ratio" in line)
    results = json.loads(out.read_text())
    assert set(results["phases"]) == {
        f"{path} c={c}"
        for path in ("direct", "relay", "runner", "relays", "proxy", "invoke")
        for c in (1, 4)
    }
    for key, phase in results["phases"].items():
        assert phase["streams"] > 0 and phase["errors"] == 0, key
        assert phase["ttftP50Ms"] > 0 and phase["tokensPerSecond"] > 0, key
    parts = results["coldStart"]
    assert all(parts[name] > 0 for name in ("assemble", "verify", "load", "firstToken")), parts
    assert not live_processes(modelserver.PROGRAM, "plnt-bench-model-")
