"""A threaded HTTP target whose calls a workflow's `http` steps make, counted and held.

The deploy tests are synchronous, so the target serves from its own thread
(`tests.support.threaded`): `GET /count/KEY` answers `"count KEY"` and counts the call;
`GET /hold/KEY` counts the call, marks that it arrived, and answers only once the test
`release`s KEY (at once when KEY is not held); `GET /big/N` answers a JSON string of N
characters. Counting calls per key is how a test proves a step ran exactly once.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from tests.support.threaded import QuietHandler, serving_in_thread

HOLD_SECONDS = 300.0
"""The longest a held call waits (a test that forgot to release must still end)."""


class StepTarget:
    """The counters and holds of the served target (thread-safe)."""

    def __init__(self) -> None:
        self.url = ""
        self.calls: Counter[str] = Counter()
        self._holds: dict[str, threading.Event] = {}
        self._arrived: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def hold(self, key: str) -> None:
        """Calls of `/hold/KEY` wait until `release(KEY)`."""
        with self._lock:
            self._holds[key] = threading.Event()
            self._arrived[key] = threading.Event()

    def release(self, key: str) -> None:
        with self._lock:
            event = self._holds.get(key)
        if event is not None:
            event.set()

    def arrivals(self, path: str) -> int:
        with self._lock:
            return self.calls[path]

    def _count(self, path: str) -> tuple[threading.Event | None, threading.Event | None]:
        key = path.rsplit("/", 1)[-1]
        with self._lock:
            self.calls[path] += 1
            return self._holds.get(key), self._arrived.get(key)

    def release_all(self) -> None:
        with self._lock:
            for event in self._holds.values():
                event.set()


def _handler(target: StepTarget) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            path = self.path
            if path.startswith("/big/"):
                self.send_json("x" * int(path.rsplit("/", 1)[-1]))
                return
            held, arrived = target._count(path)
            if path.startswith("/hold/") and held is not None:
                if arrived is not None:
                    arrived.set()
                held.wait(HOLD_SECONDS)
            kind, key = path.split("/")[1], path.rsplit("/", 1)[-1]
            self.send_json(f"{kind} {key}")

    return Handler


@contextmanager
def serving_step_target() -> Iterator[StepTarget]:
    """A `StepTarget` listening on a free loopback port, shut down (holds released) on exit."""
    target = StepTarget()
    with serving_in_thread(_handler(target), name="step target") as url:
        target.url = url
        try:
            yield target
        finally:
            target.release_all()


def durable_workflow(url: str, *, name: str = "durable") -> str:
    """Two `http` steps in a row: `first` counts a call, `slow` may be held by the test."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: {name}, version: 1.0.0}}
inputs: {{type: object, properties: {{key: {{type: string}}}}, required: [key]}}
steps:
  - id: first
    kind: http
    url: "{url}/count/{{{{ inputs.key }}}}"
    retries: 0
    timeoutSeconds: 300
  - id: slow
    kind: http
    needs: [first]
    url: "{url}/hold/{{{{ inputs.key }}}}"
    retries: 0
    timeoutSeconds: 300
output: '{{"first": steps.first.output, "slow": steps.slow.output}}'
"""
