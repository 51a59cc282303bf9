"""`GET …/bench` answers from `status.lastBench` when Temporal cannot.

The API server runs in this process with the real Temporal deploy control
(`starter.TemporalDeployControl`) on a real Temporal dev server of this module, on a task
queue no worker polls: the server's own path to Temporal, with no bench ever started
there. So Temporal "no longer has" the bench (as after its retention ran out); then the
dev server is stopped and Temporal cannot be reached at all (each GET then waits out the
Temporal client's retries, some seconds, before the server falls back).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from plnt.processes.temporal import TemporalDevServer
from plnt.sagas import starter
from tests.support.api_server import BASE, Api, serving, workflowrun

MERGE = {"Content-Type": "application/merge-patch+json"}

RECORD: dict[str, Any] = {
    "id": "bench-k3v9q2m7xa",
    "phase": "Succeeded",
    "spec": {"durationSeconds": 2, "warmupSeconds": 0, "rate": 20, "inputCount": 1},
    "targets": [{"label": "stable", "revision": 1}],
    "results": [
        {
            "label": "stable",
            "requestedRate": 20,
            "achievedRate": 19.8,
            "requests": 40,
            "latency": {"count": 40, "p50Ms": 1.5, "p99Ms": 4.0},
            "errors": {"4xx": 0, "5xx": 0, "timeout": 0, "connection": 0},
            "errorRate": 0.0,
        }
    ],
    "restarts": 0,
    "message": "bench bench-k3v9q2m7xa: stable (revision 1): 20 req/s, p50 1.5 ms",
    "startTime": "2026-01-02T03:04:05Z",
    "completionTime": "2026-01-02T03:04:08Z",
}


@pytest.fixture
async def temporal(tmp_path: Path) -> AsyncIterator[TemporalDevServer]:
    server = TemporalDevServer(tmp_path / "temporal.db", ui_port=None)
    await server.astart()
    try:
        yield server
    finally:
        await server.astop()


@pytest.fixture
async def api(
    etcd_endpoint: str, tmp_path: Path, temporal: TemporalDevServer
) -> AsyncIterator[Api]:
    client = await starter.connect(temporal.address)
    control = starter.TemporalDeployControl(client, task_queue=f"idle-{uuid.uuid4().hex[:8]}")
    async with serving(etcd_endpoint, tmp_path, deploy=control) as served:
        yield served


def assert_the_record(bench: dict[str, Any]) -> None:
    """The Bench that `status.lastBench` (RECORD) reads as."""
    assert (bench["apiVersion"], bench["kind"]) == ("plnt.work/v1", "Bench")
    assert bench["metadata"] == {
        "name": RECORD["id"],
        "namespace": "default",
        "creationTimestamp": RECORD["startTime"],
    }
    assert bench["spec"] == RECORD["spec"]
    status = bench["status"]
    assert status["phase"] == "Succeeded"
    assert status["results"] == RECORD["results"]
    assert status["targets"] == RECORD["targets"]
    assert (status["startTime"], status["completionTime"]) == (
        RECORD["startTime"],
        RECORD["completionTime"],
    )
    assert status["message"] == RECORD["message"]


async def test_get_bench_answers_from_last_bench_when_temporal_lost_it_or_is_unreachable(
    api: Api, temporal: TemporalDevServer
) -> None:
    for name in ("benched", "never"):
        assert (await api.call("POST", BASE, body=workflowrun(name))).status == 201
    # Temporal has no bench of either run, and neither has a record: nothing to answer.
    missing = await api.call("GET", f"{BASE}/benched/bench")
    assert missing.status == 404, missing.text
    assert "has no bench" in missing.json["message"]
    written = await api.call(
        "PATCH", f"{BASE}/benched/status", body={"status": {"lastBench": RECORD}}, headers=MERGE
    )
    assert written.status == 200, written.text

    # Temporal up, but without this bench: the record answers.
    reply = await api.call("GET", f"{BASE}/benched/bench")
    assert reply.status == 200, reply.text
    assert_the_record(reply.json)

    # Temporal gone: the record still answers; a run without one is 503, not a guess.
    await temporal.astop()
    recorded, unrecorded = await asyncio.gather(
        api.call("GET", f"{BASE}/benched/bench"), api.call("GET", f"{BASE}/never/bench")
    )
    assert recorded.status == 200, recorded.text
    assert_the_record(recorded.json)
    assert unrecorded.status == 503, unrecorded.text
    assert unrecorded.json["reason"] == "ServiceUnavailable"
    assert "could not be read" in unrecorded.json["message"]
    assert temporal.address in unrecorded.json["message"]
    assert unrecorded.headers["Retry-After"] == "5"
