"""`plnt invoke NAME --async` and `plnt invocation get|wait|logs NAME` as child processes.

The server is the in-process one of tests/client, without sagas: nothing runs the
Invocations, so each test writes the status a worker would, through the status
subresource, and checks what the commands make of it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from plnt.client import PlntClient
from plnt.client import invocations as client_invocations
from tests.support.cli import Cli
from tests.support.token_server import workflowrun


async def write_status(client: PlntClient, name: str, status: dict[str, Any]) -> None:
    path = client.object_path("invocations", name, subresource="status")
    await client.request(
        "PATCH", path, json={"status": status}, content_type="application/merge-patch+json"
    )


SUCCEEDED = {
    "phase": "Succeeded",
    "revision": 2,
    "startTime": "2030-01-01T00:00:00Z",
    "completionTime": "2030-01-01T00:00:41Z",
    "output": {"answer": "etcd is a consistent key-value store"},
    "usage": {"promptTokens": 10, "completionTokens": 20, "totalTokens": 30},
    "attempts": 2,
    "trace": [
        {"id": "search", "kind": "http", "resumed": True, "attempts": 0},
        {"id": "answer", "kind": "model", "durationMs": 812.5, "attempts": 1, "cache": "miss"},
    ],
    "message": "succeeded on revision 2 after 2 attempts",
}


async def test_invoke_async_prints_the_name_and_wait_prints_the_output_when_it_finished(
    cli: Cli, client: PlntClient
) -> None:
    await client.create_workflowrun(workflowrun("summarize"))
    created = await cli("invoke", "summarize", "--async", "--input", "topic=etcd")
    assert created.code == 0, created.stderr
    name = created.stdout.strip()
    assert name.startswith("summarize-")
    obj = await client_invocations.get(client, name)
    assert obj["spec"]["inputs"] == {"topic": "etcd"}

    waiting = asyncio.create_task(cli("invocation", "wait", name, "--timeout", "60"))
    await write_status(client, name, {"phase": "Running", "startTime": "2030-01-01T00:00:00Z"})
    await write_status(client, name, SUCCEEDED)
    result = await waiting
    assert result.code == 0, result.stderr
    assert '"answer": "etcd is a consistent key-value store"' in result.stdout

    shown = await cli("invocation", "get", name)
    assert shown.stdout.splitlines() == [
        f"name: {name}",
        "run: summarize",
        "phase: Succeeded",
        "revision: 2",
        "duration: 41s",
        "tokens: 30",
        "attempts: 2",
        "message: succeeded on revision 2 after 2 attempts",
    ]
    logs = await cli("invocation", "logs", name)
    assert logs.stdout.splitlines()[:3] == [
        "↻ search  resumed (finished by an earlier attempt)",
        "✓ answer  812.5 ms  attempt 1  cache miss",
        "status: succeeded on revision 2 after 2 attempts",
    ]


async def test_wait_exits_1_with_the_reason_of_a_failed_invocation_and_on_its_timeout(
    cli: Cli, client: PlntClient
) -> None:
    await client.create_workflowrun(workflowrun("summarize"))
    body = client_invocations.manifest("summarize", {}, name="doomed")
    await client_invocations.create(client, body)
    await write_status(
        client,
        "doomed",
        {
            "phase": "Failed",
            "error": {"reason": "RevisionNotFound", "message": "no revision 7"},
        },
    )
    failed = await cli("invocation", "wait", "doomed")
    assert failed.code == 1
    assert failed.stderr.strip() == (
        "error: invocation doomed failed: RevisionNotFound: no revision 7"
    )
    await client_invocations.create(
        client, client_invocations.manifest("summarize", {}, name="slow")
    )
    timed_out = await cli("invocation", "wait", "slow", "--timeout", "0.5")
    assert timed_out.code == 1
    assert "invocation slow did not finish within 0.5 s" in timed_out.stderr
    missing = await cli("invocation", "get", "nope")
    assert missing.code == 3
