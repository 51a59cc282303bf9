"""The deploy half of the saga benchmark: create a WorkflowRun and time it to Ready.

Deploy latency is measured from just before the create request is sent until the
watch delivers the object with its Ready condition True for the created generation.
The watch resumes from the create's resourceVersion, so a fast deploy is not missed.
Like the rest of `plnt.bench`, it sees plnt only through its HTTP API.

Errors: `BenchmarkError` (from `plnt.bench.apiserver`) when a deploy does not become Ready
or a run cannot be deleted before its deadline; `plnt.client.errors` pass through.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any, cast

from plnt.api import names
from plnt.bench import apiserver as harness
from plnt.client import errors as client_errors
from plnt.client.clients import WORKFLOWRUNS, PlntClient
from plnt.client.transport import WatchEvent

BenchmarkError = harness.BenchmarkError


def workflowrun(
    name: str, *, ref: str, digest: str, target: str = "local", evaluation_cases: int = 0
) -> dict[str, Any]:
    """A WorkflowRun of the published spec on the built-in echo backend, one replica; with
    `evaluation_cases`, a quality gate of that many cases (`evaluation`)."""
    spec: dict[str, Any] = {"workflow": {"ref": ref, "digest": digest}, "replicas": 1}
    spec["target"] = target
    if evaluation_cases:
        spec["canary"] = {"evaluation": evaluation(evaluation_cases)}
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.WORKFLOWRUN_KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


def evaluation(cases: int) -> dict[str, Any]:
    """A quality gate for the fanout example: each case a topic its output must name."""
    return {
        "cases": [
            {
                "name": f"topic-{index}",
                "inputs": {"topic": f"topic-{index}"},
                "expect": [{"contains": f"topic-{index}"}, {"jsonSchema": {"type": "object"}}],
            }
            for index in range(cases)
        ]
    }


def is_ready(obj: Mapping[str, Any]) -> bool:
    """Ready is True and describes the object's current generation."""
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    if status.get("observedGeneration") != generation:
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def runner_endpoint(obj: Mapping[str, Any]) -> str:
    """The first endpoint of the first traffic target (what the API server forwards to)."""
    traffic = (obj.get("status") or {}).get("traffic") or []
    endpoints = traffic[0].get("endpoints") if traffic else None
    if not endpoints:
        raise BenchmarkError(f"the ready run has no endpoint in status.traffic: {traffic}")
    return str(endpoints[0]).rstrip("/")


async def deploy_once(
    client: PlntClient,
    name: str,
    *,
    namespace: str,
    ref: str,
    digest: str,
    target: str = "local",
    within: float = 120.0,
    evaluation_cases: int = 0,
) -> tuple[float, dict[str, Any]]:
    """Create a run and watch it until Ready; (seconds from create sent, the Ready object)."""
    began = time.perf_counter()
    run = workflowrun(
        name, ref=ref, digest=digest, target=target, evaluation_cases=evaluation_cases
    )
    created = await client.create_workflowrun(run, namespace=namespace)
    latest: dict[str, Any] = created
    try:
        async with asyncio.timeout(within):
            while True:  # a watch may end (timeoutSeconds): resume from the last version
                version = (latest.get("metadata") or {}).get("resourceVersion")
                # The client's watch is an async generator: close it when leaving early.
                events = cast(
                    AsyncGenerator[WatchEvent, None],
                    client.watch_workflowrun(
                        name, namespace=namespace, resource_version=version, timeout_seconds=60
                    ),
                )
                async with contextlib.aclosing(events):
                    async for event in events:
                        if event.type == "BOOKMARK":
                            latest.setdefault("metadata", {})["resourceVersion"] = (
                                event.object.get("metadata") or {}
                            ).get("resourceVersion")
                            continue
                        if event.type == "DELETED":
                            raise BenchmarkError(f"workflowrun {name} was deleted while deploying")
                        latest = event.object
                        if is_ready(latest):
                            return time.perf_counter() - began, latest
    except TimeoutError as error:
        phase = (latest.get("status") or {}).get("phase")
        raise BenchmarkError(
            f"workflowrun {name} not Ready after {within:.0f} s (phase {phase}): "
            f"{latest.get('status')}"
        ) from error


async def delete_and_wait(
    client: PlntClient, name: str, *, namespace: str, within: float = 120.0
) -> None:
    """Delete a run and wait until it is gone (its saga tore the runners down)."""
    path = client.object_path(WORKFLOWRUNS, name, namespace=namespace)
    with contextlib.suppress(client_errors.NotFound):
        await client.request("DELETE", path)
    deadline = time.monotonic() + within
    delay = 0.02
    while True:
        try:
            await client.request("GET", path)
        except client_errors.NotFound:
            return
        if time.monotonic() > deadline:
            raise BenchmarkError(f"workflowrun {name} still exists {within:.0f} s after delete")
        await asyncio.sleep(delay)  # poll with backoff until the finalizer is released
        delay = min(delay * 2, 0.25)
