"""Fixtures of the deploy tests: a real Temporal, a real `plnt up`, a separate real worker.

One Temporal dev server per session and one API server plus worker per module keep
the suite fast; each test works in its own namespace. Specs are published into an
OCI image layout, the embedded default source.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from plnt.client.clients import InvokeResult, PlntClient
from plnt.processes.temporal import TemporalDevServer
from plnt.sagas.targets import local
from tests.support.namespaces import create_namespace
from tests.support.plnt_server import Kubectl, PlntServer, wait_for
from tests.support.processes import kill_all
from tests.support.stack import WorkerProcess, publish, runner_pids
from tests.support.temporal import terminate_running

T = TypeVar("T")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fanout.workflow.yaml"


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
    record does (a test that failed half-way may leave one); this module started them."""
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


# --- helpers shared by the rollout, lifecycle and resilience tests -------------------------


def restart_server(stack: Stack) -> None:
    """Stop the API server (SIGTERM) and start it again on the same port and state.

    The same `PlntServer` object is started again, so the module fixture still stops
    it; etcd keeps its data in the state directory and the PKI is reused, so the
    worker's kubeconfig stays valid. `stack.server.output` holds both runs' output.
    """
    stack.server.stop()
    stack.server.start()


def apply(kubectl: Kubectl, namespace: str, manifest: str) -> subprocess.CompletedProcess[str]:
    """`kubectl apply -n NAMESPACE -f -` of a manifest (one or more YAML documents)."""
    return kubectl.run("apply", "-n", namespace, "-f", "-", input=manifest)


def workflowrun(name: str, ref: str, digest: str, **spec: Any) -> str:
    """A WorkflowRun manifest (YAML) pinning `ref` at `digest`, with more `spec` fields."""
    body: dict[str, Any] = {"workflow": {"ref": ref, "digest": digest}, **spec}
    return yaml.safe_dump(
        {
            "apiVersion": "plnt.work/v1",
            "kind": "WorkflowRun",
            "metadata": {"name": name},
            "spec": body,
        }
    )


def backend_manifest(name: str, backend_type: str, *, endpoint: str | None, **extra: Any) -> str:
    """A PlntBackend manifest (YAML); `labels` goes to metadata, other fields to spec."""
    spec: dict[str, Any] = {"type": backend_type, **extra}
    if endpoint is not None:
        spec["endpoint"] = endpoint
    labels = spec.pop("labels", {})
    return yaml.safe_dump(
        {
            "apiVersion": "plnt.work/v1",
            "kind": "PlntBackend",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }
    )


def condition_of(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The status condition of type `kind`, if the object has it."""
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return dict(item)
    return None


def step_of(obj: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The saga timeline step `name` of the object's status, if present."""
    for item in (obj.get("status") or {}).get("saga") or []:
        if item.get("name") == name:
            return dict(item)
    return None


def settled(obj: dict[str, Any]) -> bool:
    """The saga has finished with the object's current generation (deployed, failed or not)."""
    generation = obj["metadata"].get("generation")
    status = obj.get("status") or {}
    progressing = condition_of(obj, "Progressing")
    return (
        status.get("observedGeneration") == generation
        and progressing is not None
        and progressing["status"] == "False"
        and progressing.get("observedGeneration") == generation
        and status.get("phase") not in (None, "RollingBack")
    )


class Api:
    """A blocking facade over `PlntClient` for synchronous tests: one loop, one client."""

    def __init__(self, kubeconfig: Path) -> None:
        self._runner = asyncio.Runner()
        self.client = PlntClient.from_kubeconfig(kubeconfig)

    def call(self, operation: Callable[[PlntClient], Awaitable[T]]) -> T:
        return self._runner.run(_await(operation(self.client)))

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return self.call(lambda c: c.get_workflowrun(name, namespace=namespace))

    def wait(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 60.0,
        message: str = "condition",
    ) -> dict[str, Any]:
        """Poll the run until `predicate(obj)`; the object (AssertionError naming the last one)."""
        last: list[dict[str, Any]] = []

        def check() -> dict[str, Any] | None:
            obj = self.get(namespace, name)
            last[:] = [obj]
            return obj if predicate(obj) else None

        try:
            found: dict[str, Any] = wait_for(check, timeout=timeout, message=message)
        except AssertionError as error:
            status = last[0].get("status") if last else None
            raise AssertionError(f"{error}; last status: {json.dumps(status, indent=1)}") from None
        return found

    def wait_settled(self, namespace: str, name: str, *, timeout: float = 60.0) -> dict[str, Any]:
        return self.wait(namespace, name, settled, timeout=timeout, message=f"{name} settled")

    def invoke(self, namespace: str, name: str, inputs: dict[str, Any]) -> InvokeResult:
        return self.call(lambda c: c.invoke(name, inputs, namespace=namespace))

    def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self.call(lambda c: c.events_for(name, namespace=namespace))

    def close(self) -> None:
        try:
            self._runner.run(self.client.close())
        finally:
            self._runner.close()


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


@pytest.fixture
def api(stack: Stack) -> Iterator[Api]:
    facade = Api(stack.server.kubeconfig)
    try:
        yield facade
    finally:
        facade.close()
