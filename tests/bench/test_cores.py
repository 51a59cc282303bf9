"""`plnt.bench.cores.own_core`: the split `--own-core` makes, checked on real threads.

It runs in a process of its own because the split changes the calling process's cores
until the block ends. The child stands for the measured process (a model server, a
Temporal server) and has a second thread, since every thread must move.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


OWN_CORE_PROBE = """
import json, os, subprocess, sys
from pathlib import Path
from plnt.bench import cores
child = subprocess.Popen(
    [sys.executable, "-c",
     "import threading, time; t = threading.Thread(target=time.sleep, args=(60,)); "
     "t.start(); print('ready', flush=True); t.join()"],
    stdout=subprocess.PIPE, text=True,
)
def affinity(pid):
    return sorted({tuple(sorted(os.sched_getaffinity(int(t.name))))
                   for t in Path(f"/proc/{pid}/task").iterdir()})
try:
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    before = affinity(os.getpid())
    with cores.own_core(child.pid, "temporal") as split:
        inside = affinity(os.getpid())
    print(json.dumps({"split": split, "child": affinity(child.pid), "self": inside,
                      "before": before, "after": affinity(os.getpid()),
                      "all": sorted(os.sched_getaffinity(0))}))
finally:
    child.kill()
    child.wait()
"""


def test_own_core_moves_every_thread_of_the_process_to_the_first_core_and_the_bench_off() -> None:
    """In a process of its own, so that a failure cannot leave the test run pinned."""
    result = subprocess.run(
        [sys.executable, "-c", OWN_CORE_PROBE], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(result.stdout)
    first, *rest = found["all"]
    assert found["child"] == [[first]], found  # both of the child's threads
    assert found["self"] == [rest], found
    assert found["after"] == found["before"] == [found["all"]], found  # given back on the way out
    assert found["split"] == f"temporal on core {first}, the rest on {','.join(map(str, rest))}"
