"""Spill-over end to end: a run whose primary backend misses its TTFT objective spills new
calls to the pool's backend that meets it, and returns when the primary recovers.

Two OpenAI stand-ins (`tests/support/llm.py`) in pool `p`: `primary`, which the run names,
and `spare`. A second worker probes both every 0.2 s (`probing_worker`), so their measured
TTFTs follow what the stand-ins do. The run's calls stream through its OpenAI proxy; the
stand-ins' request logs say who served each (probes are not in them). The primary is made
slow by delaying every stream's first token, then fast again: the calls go to `spare`
while it is slow and back once a probe finds it fast, with an Event each way, the spilled
calls counted in the API server's metric and marked in the invocation log.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import aiohttp

from plnt.bench import continuations
from plnt.client import transport
from plnt.client.clients import PlntClient
from tests.support.blocking_api import Api
from tests.support.llm import threaded_llm
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.stack import Stack, WorkerProcess
from tests.support.statuses import settled

NAME = "spilling"
OBJECTIVE_MS = 300
SLOW_SECONDS = 1.0
"""The primary's first-token delay while slow: well over the objective."""


async def _call(kubeconfig: Any, namespace: str) -> None:
    """One streamed completion through the run's OpenAI proxy, read to its end."""
    async with PlntClient.from_kubeconfig(kubeconfig) as client:
        base = client.object_path("workflowruns", NAME, namespace=namespace, subresource="proxy")
        connector = aiohttp.TCPConnector(ssl=transport.ssl_context(client.connection))
        body = {"model": "continue", "prompt": "one two three", "stream": True}
        async with (
            aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=60)
            ) as session,
            session.post(f"{client.connection.server}{base}/v1/completions", json=body) as got,
        ):
            assert got.status == 200, await got.text()
            assert "[DONE]" in await got.text()


def _ttft(kubectl: Kubectl, namespace: str, name: str) -> int | None:
    obj: dict[str, Any] = kubectl.json("get", "-n", namespace, "plntbackend", name)
    value = (obj.get("status") or {}).get("timeToFirstTokenMilliseconds")
    return value if isinstance(value, int) else None


def _event(api: Api, namespace: str, reason: str) -> dict[str, Any] | None:
    for event in api.events(namespace, NAME):
        if event.get("reason") == reason:
            return event
    return None


def _spilled_metric(kubectl: Kubectl, namespace: str) -> float:
    text = kubectl.run("get", "--raw", "/metrics").stdout
    pattern = (
        r"^plnt_workflowrun_spilled_calls_total\{"
        rf'backend="spare",namespace="{namespace}",workflowrun="{NAME}"\}} (\S+)$'
    )
    found = re.search(pattern, text, re.M)
    return float(found.group(1)) if found else 0.0


def test_calls_spill_to_the_pools_backend_that_meets_the_objective_and_return_on_recovery(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, probing_worker: WorkerProcess
) -> None:
    kubeconfig = stack.server.kubeconfig

    def call() -> None:
        asyncio.run(_call(kubeconfig, namespace))

    with (
        threaded_llm(None, prefix="primary") as primary,
        threaded_llm(None, prefix="spare") as spare,
    ):
        for llm, name in ((primary, "primary"), (spare, "spare")):
            apply(
                kubectl,
                namespace,
                backend_manifest(name, "openai", endpoint=llm.url, models=["m"], pool="p"),
            )
        spec = (
            continuations.spec_text(4)
            + 'smoke: {inputs: {prefix: "hi"}, expect: {contains: "hi"}}\n'
        )
        ref, digest = stack.spec("spill-1", text=spec)
        slo = {"timeToFirstToken": {"percentile": 90, "milliseconds": OBJECTIVE_MS}}
        run = workflowrun(
            NAME,
            ref,
            digest,
            backend={"name": "primary", "pool": "p"},
            cache={"enabled": False},
            slo=slo,
        )
        apply(kubectl, namespace, run)
        api.wait(
            namespace,
            NAME,
            lambda obj: settled(obj) and obj["status"].get("revision") == 1,
            message="revision 1",
        )
        wait_for(
            lambda: (_ttft(kubectl, namespace, "spare") or OBJECTIVE_MS) < OBJECTIVE_MS,
            timeout=20,
            message="the spare's TTFT probed within the objective",
        )

        # Fast primary: it serves every call (the deploy's smoke and analysis calls too).
        deployed = len(primary.requests)
        for _ in range(3):
            call()
        assert (len(primary.requests), len(spare.requests)) == (deployed + 3, 0)

        # Slow primary: once its calls miss the objective, new calls go to the spare.
        primary.first_token_delay = SLOW_SECONDS

        def spilled() -> bool:
            call()
            return len(spare.requests) > 0

        wait_for(spilled, timeout=60, interval=0, message="a call spilled to the spare")
        served = len(primary.requests)
        assert served > deployed + 3  # it spilled only once the primary had been slow
        for _ in range(2):
            call()
        assert len(primary.requests) == served  # the spare serves while the primary is slow
        event = wait_for(lambda: _event(api, namespace, "SpillingOver"), message="SpillingOver")
        assert event["type"] == "Warning"
        assert f"objective {OBJECTIVE_MS} ms at p90" in event["message"], event["message"]
        assert "new calls spill to spare of pool p" in event["message"], event["message"]
        assert _spilled_metric(kubectl, namespace) == len(spare.requests)
        path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/{NAME}/invocationlog"
        log = json.loads(kubectl.run("get", "--raw", path).stdout)
        marked = [entry for entry in log["items"] if entry.get("spilledTo") == "spare"]
        assert len(marked) == len(spare.requests)

        # The primary recovers: a probe finds it fast, and new calls return to it.
        primary.first_token_delay = 0.0

        def returned() -> bool:
            call()
            return len(primary.requests) > served

        wait_for(returned, timeout=60, interval=0, message="a call back on the primary")
        ended = wait_for(lambda: _event(api, namespace, "SpillOverEnded"), message="SpillOverEnded")
        assert ended["type"] == "Normal"
        assert "primary meets" in ended["message"] and "return to it" in ended["message"]
        spared = len(spare.requests)
        call()
        assert len(spare.requests) == spared
