"""`plnt serve` cancels a request's handler when its caller goes away, as `plnt up` does:
a buffered invoke whose caller left cancels the runner's call at once instead of holding
it (and the backend) until the call's deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.support.cluster import Cluster
from tests.support.examples import EXAMPLES
from tests.support.runners import runner_process
from tests.support.traffic import target
from tests.support.waiting import eventually

DIGEST = "sha256:" + "0" * 64


@pytest.fixture
async def slow_runner(tmp_path: Path) -> AsyncIterator[str]:
    """A runner whose echo backend answers in 30 s."""
    config = tmp_path / "backend.json"
    config.write_text(json.dumps({"type": "echo", "name": "echo", "latencyMs": 30000}))
    async with runner_process(
        "--spec", str(EXAMPLES / "chat.workflow.yaml"), "--backend-config", str(config)
    ) as (_, url):
        yield url


async def test_a_caller_that_leaves_a_buffered_invoke_cancels_the_runners_call_under_serve(
    cluster: Cluster, token: tuple[str, str], slow_runner: str
) -> None:
    secret, namespace = token
    base = f"{cluster.plnt_url}/apis/plnt.work/v1/namespaces/{namespace}/workflowruns"
    headers = {"Authorization": f"Bearer {secret}"}
    connector = aiohttp.TCPConnector(ssl=cluster.plnt_context())
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        run = {
            "apiVersion": "plnt.work/v1",
            "kind": "WorkflowRun",
            "metadata": {"name": "w"},
            "spec": {"workflow": {"ref": "oci://r.example/never:1", "digest": DIGEST}},
        }
        async with session.post(base, json=run) as created:
            assert created.status == 201, await created.text()
        traffic = {"status": {"revision": 1, "traffic": [target(1, 100, slow_runner)]}}
        merge = {"Content-Type": "application/merge-patch+json"}
        async with session.patch(f"{base}/w/status", json=traffic, headers=merge) as patched:
            assert patched.status == 200, await patched.text()

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):  # the caller gives up and closes its connection
                body = {"inputs": {"question": "gone"}}
                async with session.post(f"{base}/w/invoke", json=body) as answer:
                    await answer.read()

    async with aiohttp.ClientSession() as plain:

        async def cancelled() -> bool:
            async with plain.get(f"{slow_runner}/metrics") as response:
                text = await response.text()
            return (
                'plnt_runner_invocations_total{endpoint="invoke",outcome="cancelled"} 1.0' in text
            )

        # Well before the 30 s the backend call would take: the runner's call was cancelled.
        await eventually(cancelled, within=10.0, what="the runner to count the call cancelled")
