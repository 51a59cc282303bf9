"""Durable Invocations on a standalone stack, as the deploy tests drive them: the
Invocation's manifest, waiting for its phase, what a runner received by its `/metrics`,
and the worker lost (SIGKILL) while a call runs.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import yaml

from tests.support.blocking_api import Api
from tests.support.plnt_server import wait_for
from tests.support.stack import Stack, WorkerProcess

INVOCATIONS = "invocations"


def invocation(name: str, run: str, inputs: dict[str, Any], **spec: Any) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "plnt.work/v1",
            "kind": "Invocation",
            "metadata": {"name": name},
            "spec": {"workflowRun": run, "inputs": inputs, **spec},
        }
    )


def step_key() -> str:
    """A key no other call uses, and a string in every YAML: a bare hex string such as
    `0e123456` is written unquoted by PyYAML (a string to it) but read as the number 0 by
    kubectl's YAML, and the Invocation would fail with InvalidInputs."""
    return f"k{uuid.uuid4().hex[:8]}"


def get_invocation(api: Api, namespace: str, name: str) -> dict[str, Any]:
    path = api.client.object_path(INVOCATIONS, name, namespace=namespace)
    body: dict[str, Any] = api.call(lambda c: c.request("GET", path)).json()
    return body


def wait_invocation(
    api: Api, namespace: str, name: str, check: Any, *, timeout: float = 60.0, what: str = ""
) -> dict[str, Any]:
    last: list[dict[str, Any]] = []

    def probe() -> dict[str, Any] | None:
        obj = get_invocation(api, namespace, name)
        last[:] = [obj]
        return obj if check(obj) else None

    try:
        found: dict[str, Any] = wait_for(probe, timeout=timeout, message=what or "invocation")
    except AssertionError as error:
        status = last[0].get("status") if last else None
        raise AssertionError(f"{error}; last status: {json.dumps(status, indent=1)}") from None
    return found


def phase(expected: str) -> Any:
    return lambda obj: (obj.get("status") or {}).get("phase") == expected


def runner_metrics(endpoint: str) -> str:
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=10) as response:
        text: str = response.read().decode()
    return text


def received(endpoint: str) -> int:
    """Calls of `/invoke` the replica at `endpoint` has received so far: those that ended,
    whatever their outcome, and those still running."""
    text = runner_metrics(endpoint)
    ended = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("plnt_runner_invocations_total{") and 'endpoint="invoke"' in line
    )
    return int(ended + in_flight(text))


def in_flight(text: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("plnt_runner_in_flight ")
    )


def only_endpoint(api: Api, namespace: str, run: str) -> str:
    (entry,) = api.get(namespace, run)["status"]["traffic"]
    (endpoint,) = entry["endpoints"]
    return str(endpoint).rstrip("/")


@contextlib.contextmanager
def worker_lost(stack: Stack) -> Iterator[WorkerProcess]:
    """The module's worker (which runs every call), SIGKILLed when the block ends — also
    when it fails, and also when the block stopped it (SIGSTOP) — as a crashed machine
    would be; then a new worker takes its place (and the module fixture stops it)."""
    lost = stack.worker
    try:
        yield lost
    finally:
        lost.kill()
        lost.stop()  # reaps it and closes its pipes
        standby = WorkerProcess(stack.temporal.address, stack.server.kubeconfig, stack.state_dir)
        stack.worker = standby  # the module fixture stops it, even if it fails to start
        standby.start()
