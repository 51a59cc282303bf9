"""The model benchmark runs end to end with tiny counts and prints its ratio lines.

Nothing here asserts a speed: the test proves that `python -m plnt.bench model` starts the
model cold (its own server: the cold start is what it measures), etcd, the API server and a
runner, that every path streamed tokens at both concurrencies, that the cold start is split
into its four parts, and that no child outlives it.
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
        f"ratio {path}/direct c={c}:" for c in (1, 4) for path in ("runner", "proxy", "invoke")
    ]
    assert all("% of direct" in line and "tok/s ratio" in line for line in lines if "ratio" in line)
    results = json.loads(out.read_text())
    assert set(results["phases"]) == {
        f"{path} c={c}" for path in ("direct", "runner", "proxy", "invoke") for c in (1, 4)
    }
    for key, phase in results["phases"].items():
        assert phase["streams"] > 0 and phase["errors"] == 0, key
        assert phase["ttftP50Ms"] > 0 and phase["tokensPerSecond"] > 0, key
    parts = results["coldStart"]
    assert all(parts[name] > 0 for name in ("assemble", "verify", "load", "firstToken")), parts
    assert not live_processes(modelserver.PROGRAM, "plnt-bench-model-")


OWN_CORE_PROBE = """
import json, os, subprocess, sys
from pathlib import Path
from plnt.bench import model
child = subprocess.Popen(
    [sys.executable, "-c",
     "import threading, time; t = threading.Thread(target=time.sleep, args=(60,)); "
     "t.start(); print('ready', flush=True); t.join()"],
    stdout=subprocess.PIPE, text=True,
)
try:
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    split = model.own_core(child.pid)
    def cores(pid):
        return sorted({tuple(sorted(os.sched_getaffinity(int(t.name))))
                       for t in Path(f"/proc/{pid}/task").iterdir()})
    print(json.dumps({"split": split, "child": cores(child.pid), "self": cores(os.getpid()),
                      "all": sorted(os.sched_getaffinity(0) | set(cores(child.pid)[0]))}))
finally:
    child.kill()
    child.wait()
"""


def test_own_core_gives_the_model_servers_threads_the_first_core_and_the_bench_the_rest() -> None:
    """In a process of its own: the split changes the calling process's cores for good."""
    result = subprocess.run(
        [sys.executable, "-c", OWN_CORE_PROBE], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(result.stdout)
    first, *rest = found["all"]
    assert found["child"] == [[first]], found  # both of the child's threads
    assert found["self"] == [rest], found
    assert found["split"] == f"model server on core {first}, the rest on {','.join(map(str, rest))}"
