"""Fixtures of the UI tests: `plnt ui` against the deploy stack, a browser, held endpoints.

The stack (Temporal, `plnt up`, a worker, local runners) is the suite's (`stack`,
`tests/support/stack.py`), one per module; `plnt ui` runs as the real command in a child
process, one per module too (`tests/support/ui.py`), and each test opens a fresh browser
context through the launch URL.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.browser import browser, playwright_driver
from tests.support.manifests import apply, workflowrun
from tests.support.namespaces import create_namespace
from tests.support.plnt_server import Kubectl
from tests.support.stack import Stack
from tests.support.ui import Hold, ThreadedApi, UiServer, publish, start_ui, wait_ready

__all__ = ["browser", "playwright_driver"]


@pytest.fixture
def ui_api(stack: Stack) -> Iterator[ThreadedApi]:
    facade = ThreadedApi(stack.server.kubeconfig)
    try:
        yield facade
    finally:
        facade.close()


@pytest.fixture(scope="module")
def ui(stack: Stack) -> Iterator[UiServer]:
    server = start_ui(stack.server.kubeconfig)
    try:
        yield server
    finally:
        server.child.stop()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    return tmp_path / "screenshots"


@pytest.fixture
def hold() -> Iterator[Hold]:
    """A `Hold` on a free loopback port, released (and closed) when the test ends."""
    state: dict[str, Hold] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            gate = state["hold"]
            gate.arrived.set()
            gate.release.wait(timeout=120)
            body = b'{"opened": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state["hold"] = Hold(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state["hold"]
    finally:
        state["hold"].release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def ui_namespace(stack: Stack) -> str:
    """One namespace for the module's shared runs."""
    return create_namespace(stack.server.url, stack.server.pki_dir, f"ui-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def fan(stack: Stack, ui_namespace: str) -> Iterator[str]:
    """The example workflow deployed twice (revisions 1 and 2), Ready: its name."""
    facade = ThreadedApi(stack.server.kubeconfig)
    kubectl = Kubectl(kubeconfig=stack.server.kubeconfig, cache_dir=stack.state_dir / "kcache")
    try:
        for generation, version in ((1, "1.0.0"), (2, "2.0.0")):
            ref, digest = publish(stack, f"ui-fan-{version}", version=version)
            apply(kubectl, ui_namespace, workflowrun("fan", ref, digest))
            wait_ready(facade, ui_namespace, "fan", generation=generation)
        yield "fan"
    finally:
        facade.close()
