"""Fixtures of the deploy tests: a real Temporal, a real `plnt up`, a separate real worker.

One Temporal dev server per session and one API server plus worker per module keep
the suite fast; each test works in its own namespace. Specs are published into an
OCI image layout, the embedded default source.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plnt.sagas.targets import local
from plnt.sagas.temporal_process import TemporalDevServer
from tests.support.plnt_server import Kubectl, PlntServer
from tests.support.stack import WorkerProcess, publish

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


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path_factory.mktemp("temporal") / "t.db", ui_port=None)
    asyncio.run(server.astart())
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def stack(temporal: TemporalDevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    state = tmp_path_factory.mktemp("plnt-deploy")
    server = PlntServer(
        state,
        sagas=True,
        extra_args=("--temporal-address", temporal.address, "--no-worker"),
    )
    server.start()
    worker: WorkerProcess | None = None
    built: Stack | None = None
    try:
        worker = WorkerProcess(temporal.address, server.kubeconfig, state).start()
        built = Stack(state, state / "layout", temporal, server, worker)
        yield built
    finally:
        if built is not None:
            built.worker.stop()
        elif worker is not None:
            worker.stop()
        server.stop()
        local.stop_all(state / "runners")


@pytest.fixture
def kubectl(stack: Stack, tmp_path: Path) -> Kubectl:
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    return Kubectl(kubeconfig=stack.server.kubeconfig, cache_dir=cache)


@pytest.fixture
def namespace() -> str:
    return f"d-{uuid.uuid4().hex[:10]}"
