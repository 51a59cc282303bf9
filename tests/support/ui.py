"""`plnt ui` under test, and the stack it shows driven from outside Playwright's thread.

`start_ui(kubeconfig)` runs the real `plnt ui --no-browser` in a child process and reads
its URL and launch token (`UiServer`, whose `open` signs a fresh browser context in).
Playwright's sync API runs an event loop in the test's thread, so the helpers that run
their own (the blocking client facade, `Stack.spec`) are called in one other thread
(`off_loop`, `ThreadedApi`, `publish`). `Hold` is an HTTP endpoint that answers only
when released, and `held_workflow(url)` a spec whose smoke case waits on it.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from playwright.sync_api import Browser, Page

from tests.support.blocking_api import Api
from tests.support.plnt_server import ChildProcess
from tests.support.stack import Stack

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


@dataclass
class Hold:
    """An HTTP endpoint whose `GET /hold` answers only once `release` is set."""

    url: str
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


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
