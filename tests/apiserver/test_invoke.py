"""`POST …/invoke` and `GET …/invocationlog` against real runner processes.

The runners are `python -m plnt.runner` child processes with the echo backend; the
tests play the saga's part by writing `status.traffic` through the status subresource.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.api_server import BASE, Api, workflowrun
from tests.support.gate import Gate, serving_gate
from tests.support.traffic import invoke, run_with_traffic, target

MERGE = {"Content-Type": "application/merge-patch+json"}
DEADLINE_SECONDS = 20.0


async def test_invoke_answers_the_runner_body_with_revision_cache_and_timing_headers(
    api: Api, runner_a: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, runner_a))
    first = await invoke(api, "w", "hello")
    assert first.status == 200, first.text
    assert first.json["output"] == "hello"
    assert first.headers["X-Plnt-Revision"] == "1"
    assert first.headers["X-Plnt-Cache"] == "miss"
    timing = first.headers["Server-Timing"]
    assert "runner;dur=" in timing
    assert timing.rsplit(", ", 1)[-1].startswith("apiserver;dur=")
    again = await invoke(api, "w", "hello")
    assert again.headers["X-Plnt-Cache"] == "hit"


async def test_invoke_passes_the_callers_no_cache_to_the_runner(api: Api, runner_a: str) -> None:
    await run_with_traffic(api, "w", target(1, 100, runner_a))
    assert (await invoke(api, "w", "cached")).headers["X-Plnt-Cache"] == "miss"
    path = f"{BASE}/w/invoke"
    body = {"inputs": {"question": "cached"}}
    for stream in ("", "?stream=true"):
        reply = await api.call(
            "POST", path + stream, body=body, headers={"Cache-Control": "no-cache"}
        )
        assert reply.status == 200, reply.text
        last = reply.json if not stream else json.loads(reply.text.strip().splitlines()[-1])
        assert last["cache"]["bypassed"] >= 1 and last["cache"]["hits"] == 0, last
    assert (await invoke(api, "w", "cached")).headers["X-Plnt-Cache"] == "hit"


async def test_invalid_inputs_come_back_with_the_runner_status_unchanged(
    api: Api, runner_a: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, runner_a))
    reply = await api.call("POST", f"{BASE}/w/invoke", body={"inputs": {"nope": 1}})
    assert 400 <= reply.status < 500
    assert reply.headers["X-Plnt-Cache"] == "off"


async def test_a_body_without_the_inputs_envelope_is_a_400_naming_it(api: Api) -> None:
    assert (await api.call("POST", BASE, body=workflowrun("w"))).status == 201
    reply = await api.call("POST", f"{BASE}/w/invoke", body={"question": "q?"})
    assert reply.status == 400
    assert '{"inputs": {...}}' in reply.json["message"]


async def test_a_body_naming_its_api_version_and_kind_reaches_the_runner_and_is_answered(
    api: Api, runner_a: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, runner_a))
    body = {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRunInvocationRequest",
        "inputs": {"question": "named"},
    }
    reply = await api.call("POST", f"{BASE}/w/invoke", body=body)
    assert reply.status == 200, reply.text
    assert reply.json["output"] == "named"
    assert reply.headers["X-Plnt-Revision"] == "1"


async def test_a_yaml_body_is_accepted_and_malformed_json_is_a_400(api: Api, runner_a: str) -> None:
    await run_with_traffic(api, "w", target(1, 100, runner_a))
    reply = await api.call(
        "POST",
        f"{BASE}/w/invoke",
        data=b"inputs:\n  question: from yaml\n",
        headers={"Content-Type": "application/yaml"},
    )
    assert reply.status == 200, reply.text
    assert reply.json["output"] == "from yaml"
    broken = await api.call(
        "POST",
        f"{BASE}/w/invoke",
        data=b'{"inputs": ',
        headers={"Content-Type": "application/json"},
    )
    assert broken.status == 400
    assert broken.json["message"].startswith("the body of the request could not be decoded")


async def test_a_run_without_ready_traffic_is_a_503_service_unavailable(api: Api) -> None:
    assert (await api.call("POST", BASE, body=workflowrun("idle"))).status == 201
    reply = await invoke(api, "idle")
    assert reply.status == 503
    assert reply.json["reason"] == "ServiceUnavailable"
    assert reply.json["message"] == "workflowrun idle has no ready revision"
    missing = await invoke(api, "missing")
    assert missing.status == 404


async def test_weights_send_nothing_to_weight_zero_and_use_both_revisions_at_fifty_fifty(
    api: Api, runner_a: str, runner_b: str
) -> None:
    await run_with_traffic(api, "w", target(1, 0, runner_a), target(2, 100, runner_b))
    revisions = {(await invoke(api, "w", f"q{i}")).headers["X-Plnt-Revision"] for i in range(20)}
    assert revisions == {"2"}
    reply = await api.call(
        "PATCH",
        f"{BASE}/w/status",
        body={"status": {"traffic": [target(1, 50, runner_a), target(2, 50, runner_b)]}},
        headers=MERGE,
    )
    assert reply.status == 200
    seen: set[str] = set()
    for i in range(60):
        seen.add((await invoke(api, "w", f"r{i}")).headers["X-Plnt-Revision"])
    assert seen == {"1", "2"}


@pytest.fixture
async def held_runner() -> AsyncIterator[Gate]:
    """An upstream that holds each invocation until released: (url, arrived, release)."""
    async with serving_gate() as gate:
        yield gate


async def test_calls_go_to_the_endpoint_with_the_fewest_in_flight(
    api: Api, runner_a: str, held_runner: Gate
) -> None:
    held, arrived, release = held_runner
    await run_with_traffic(api, "w", target(1, 100, held, runner_a))
    # Ties go round robin: within two calls one lands on the held endpoint and stays there.
    pending: asyncio.Task[Any] | None = None
    for i in range(2):
        pending = asyncio.create_task(invoke(api, "w", f"first{i}"))
        arrival = asyncio.create_task(arrived.wait())
        await asyncio.wait({pending, arrival}, return_when=asyncio.FIRST_COMPLETED)
        arrival.cancel()
        if arrived.is_set():
            break
    assert arrived.is_set() and pending is not None and not pending.done()
    try:
        for i in range(10):
            reply = await invoke(api, "w", f"next{i}")
            assert reply.json["output"] == f"next{i}"
        log = (await api.call("GET", f"{BASE}/w/invocationlog")).json["items"]
        assert {entry["endpoint"] for entry in log[-10:]} == {runner_a}
    finally:
        release.set()
        held_reply = await asyncio.wait_for(pending, DEADLINE_SECONDS)
    assert held_reply.json["output"] == "held"
    assert held_reply.headers["X-Plnt-Cache"] == "off"


async def test_an_unreachable_endpoint_fails_over_once_to_another(
    api: Api, runner_a: str, closed_endpoint: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, closed_endpoint, runner_a))
    for i in range(4):
        reply = await invoke(api, "w", f"q{i}")
        assert reply.status == 200, reply.text
    log = (await api.call("GET", f"{BASE}/w/invocationlog")).json["items"]
    assert {entry["endpoint"] for entry in log} == {runner_a}


async def test_only_unreachable_endpoints_give_a_503_naming_them(
    api: Api, closed_endpoint: str
) -> None:
    await run_with_traffic(api, "w", target(1, 100, closed_endpoint))
    reply = await invoke(api, "w")
    assert reply.status == 503
    assert reply.json["reason"] == "ServiceUnavailable"
    assert closed_endpoint in reply.json["message"]


async def test_the_invocation_log_keeps_the_last_hundred_entries(api: Api, runner_a: str) -> None:
    await run_with_traffic(api, "w", target(3, 100, runner_a))
    for i in range(105):
        assert (await invoke(api, "w", f"q{i % 3}")).status == 200
    listing = await api.call("GET", f"{BASE}/w/invocationlog")
    assert listing.status == 200
    body = listing.json
    assert body["kind"] == "WorkflowRunInvocationList"
    assert body["apiVersion"] == "plnt.work/v1"
    assert len(body["items"]) == 100
    entry = body["items"][-1]
    assert entry["revision"] == 3
    assert entry["endpoint"] == runner_a
    assert entry["status"] == 200
    assert entry["cache"] == "hit"
    assert entry["durationMs"] >= 0
    assert entry["time"]


async def test_discovery_lists_the_runtime_subresources_with_their_verbs(api: Api) -> None:
    legacy = (await api.call("GET", "/apis/plnt.work/v1")).json["resources"]
    verbs = {r["name"]: r["verbs"] for r in legacy}
    assert verbs["workflowruns/invoke"] == ["create"]
    assert verbs["workflowruns/rollback"] == ["create"]
    assert verbs["workflowruns/abort"] == ["create"]
    assert verbs["workflowruns/invocationlog"] == ["get"]
    assert "workflowruns/scale" in verbs
    v2 = await api.call(
        "GET",
        "/apis",
        headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"},
    )
    resources = v2.json["items"][0]["versions"][0]["resources"]
    runs = next(r for r in resources if r["resource"] == "workflowruns")
    subs = {s["subresource"]: s["verbs"] for s in runs["subresources"]}
    assert subs["invoke"] == ["create"] and subs["invocationlog"] == ["get"]
    assert subs["invocations"] == ["get"]  # the log's deprecated name, still listed
    openapi = (await api.call("GET", "/openapi/v3/apis/plnt.work/v1")).json
    item = "/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/{name}"
    for sub in ("invoke", "rollback", "abort"):
        assert "post" in openapi["paths"][f"{item}/{sub}"]
    assert "get" in openapi["paths"][f"{item}/invocationlog"]
