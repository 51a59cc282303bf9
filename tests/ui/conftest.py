"""Fixtures of the UI tests: the deploy tests' real stack, `plnt ui` against it, a browser.

The stack (Temporal, `plnt up`, a worker, local runners) comes from the deploy tests'
fixtures, one per module; `plnt ui` runs as the real command in a child process, one per
module too, and each test opens a fresh browser context through the launch URL.
"""

from __future__ import annotations

import re
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from playwright.sync_api import Browser, Page

from tests.deploy.conftest import (
    Api,
    Stack,
    apply,
    kubectl,
    namespace,
    stack,
    temporal,
    workflowrun,
)
from tests.support.browser import browser, playwright_driver
from tests.support.namespaces import create_namespace
from tests.support.plnt_server import ChildProcess, Kubectl

__all__ = ["browser", "kubectl", "namespace", "playwright_driver", "stack", "temporal"]

T = TypeVar("T")

# Playwright's sync API runs an event loop in the test's thread, so helpers that run
# their own (`asyncio.run`, `asyncio.Runner`) are called in this one other thread.
_OFF_LOOP = ThreadPoolExecutor(max_workers=1, thread_name_prefix="off-loop")


def off_loop(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`call(*args, **kwargs)` in the helper thread, its result or its exception here."""
    return _OFF_LOOP.submit(call, *args, **kwargs).result()


class ThreadedApi:
    """The deploy tests' `Api`, used from the helper thread."""

    def __init__(self, kubeconfig: Path) -> None:
        self._api = off_loop(Api, kubeconfig)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return off_loop(self._api.get, namespace, name)

    def wait(self, namespace: str, name: str, predicate: Callable[[dict[str, Any]], bool],
             **options: Any) -> dict[str, Any]:  # fmt: skip
        return off_loop(self._api.wait, namespace, name, predicate, **options)

    def close(self) -> None:
        off_loop(self._api.close)


@pytest.fixture
def ui_api(stack: Stack) -> Iterator[ThreadedApi]:
    facade = ThreadedApi(stack.server.kubeconfig)
    try:
        yield facade
    finally:
        facade.close()


def publish(stack: Stack, tag: str, **options: Any) -> tuple[str, str]:
    """`stack.spec` (which runs its own event loop) from the helper thread."""
    return off_loop(stack.spec, tag, **options)


URL_LINE = re.compile(r"plnt UI at (http://127\.0\.0\.1:\d+)/\?token=(\S+)")


@dataclass
class UiServer:
    """A running `plnt ui`: its base URL and its launch token."""

    child: ChildProcess
    base: str = ""
    token: str = ""

    @property
    def url(self) -> str:
        return f"{self.base}/?token={self.token}"

    def open(self, browser: Browser, path: str = "/") -> Page:
        """A fresh context signed in with the token, at `path`."""
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(self.url)
        if path != "/":
            page.goto(self.base + path)
        return page


def start_ui(kubeconfig: Path) -> UiServer:
    """`plnt ui --no-browser` with `kubeconfig`, ready once it printed its URL."""
    argv = [sys.executable, "-m", "plnt", "ui", "--no-browser", "--kubeconfig", str(kubeconfig)]
    child = ChildProcess(argv, "plnt UI at", "plnt ui", start_timeout=60.0)
    child.start()
    server = UiServer(child)
    for line in child.output:
        found = URL_LINE.search(line)
        if found:
            server.base, server.token = found.group(1), found.group(2)
    if not server.base:
        child.stop()
        raise RuntimeError("plnt ui printed no URL:\n" + "".join(child.output))
    return server


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


@dataclass
class Hold:
    """An HTTP endpoint whose `GET /hold` answers only once `release` is set."""

    url: str
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


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


def held_workflow(url: str) -> str:
    """A spec whose smoke case calls `url` (so the deploy's smoke step waits for it)."""
    return yaml.safe_dump(
        {
            "apiVersion": "microagents.plnt.work/v1",
            "kind": "Workflow",
            "metadata": {"name": "held", "version": "1.0.0"},
            "inputs": {
                "type": "object",
                "properties": {"who": {"type": "string", "minLength": 1}},
                "required": ["who"],
            },
            "steps": [
                {"id": "greet", "kind": "transform", "template": "hello {{ inputs.who }}"},
                {
                    "id": "call",
                    "kind": "http",
                    "needs": ["greet"],
                    "url": url,
                    "retries": 0,
                    "timeoutSeconds": 120,
                },
            ],
            "output": "steps.greet.output",
            "smoke": {"inputs": {"who": "smoke"}, "expect": {"contains": "hello"}},
        }
    )


def wait_ready(api: ThreadedApi, namespace: str, name: str, *, generation: int = 1) -> None:
    def ready(obj: dict[str, object]) -> bool:
        status = obj.get("status") or {}
        assert isinstance(status, dict)
        return status.get("phase") == "Ready" and status.get("observedGeneration") == generation

    api.wait(namespace, name, ready, timeout=90, message=f"{name} Ready at generation {generation}")


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
