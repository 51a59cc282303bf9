"""A WorkflowRun deployed on the real model, end to end: the deploy, streams through plnt's
OpenAI proxy, `/bench`, backend probing, and the model server dying mid-stream.

The stack is the deploy tests' (real Temporal, `plnt up` with sagas, a separate worker, real
runner processes, `tests/support/stack.py`); the model is the session's one model server
(`tests/support/model.py`), registered here as a PlntBackend of type `openai`, as
`plnt up --model` registers it. The run's step cache is off, so every call reaches the
model: the model server's own counter of answered generation requests (its `/metrics`)
shows what ran on it.

Assertions are about structure and behaviour: that an answer streams (its first token comes
in an earlier read than its end), counts equal to the server's own, numbers that are
non-zero and consistent with each other, never how fast this machine is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from plnt.api import codec
from plnt.bench import continuations
from plnt.client import transport
from plnt.client.clients import PlntClient
from plnt.processes.modelserver import ModelServer
from plnt.processes.supervision import Backoff, supervising
from plnt.standalone import modelserving
from tests.support.blocking_api import Api
from tests.support.manifests import workflowrun
from tests.support.model import COUNTING, PIN, complete
from tests.support.namespaces import create_namespace
from tests.support.stack import Stack, WorkerProcess, probing_worker_on
from tests.support.statuses import condition_of, settled, step_of
from tests.support.waiting import eventually

NAME = "on-the-model"
TOKENS = 16
"""Tokens per answer: long enough that an answer is still flowing a read after its first."""
SPEC = continuations.spec_text(TOKENS, smoke=True)
ANALYSIS = {"requests": 4, "maxErrorRate": 0.0, "maxP95Milliseconds": 60_000}
"""Four requests per revision (canary and stable side by side), none may fail; the p95
limit is there only so the verdict names the p95 it measured."""


def answered(server: ModelServer) -> float:
    """Generation requests the model server has answered (`plnt_model_requests_total`)."""
    with urllib.request.urlopen(f"{server.root}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "plnt_model_requests_total":
                return float(sample.value)
    raise AssertionError("the model server reports no plnt_model_requests_total")


@dataclass
class Deployed:
    """The module's run: revision 1, then revision 2 promoted through a canary analysis."""

    stack: Stack
    namespace: str
    obj: dict[str, Any]
    answered_before: float
    answered_after: float


def _revision_settled(revision: int) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        return settled(obj) and obj["status"].get("revision") == revision

    return check


@pytest.fixture(scope="module")
def deployed(stack: Stack, model_server: ModelServer) -> Iterator[Deployed]:
    namespace = create_namespace(
        stack.server.url, stack.server.pki_dir, f"m-{uuid.uuid4().hex[:10]}"
    )
    api = Api(stack.server.kubeconfig)
    try:
        backend = modelserving.backend_of(model_server)
        backend["metadata"]["namespace"] = namespace
        api.call(lambda c: c.apply_backend(backend, namespace=namespace, field_manager="test"))
        ref_1, digest_1 = stack.spec("model-1", text=SPEC)
        first = workflowrun(
            NAME, ref_1, digest_1, backend={"name": PIN.name}, cache={"enabled": False}
        )
        api.call(lambda c: c.create_workflowrun(_loaded(first), namespace=namespace))
        api.wait(namespace, NAME, _revision_settled(1), timeout=180, message="revision 1")

        before = answered(model_server)
        ref_2, digest_2 = stack.spec("model-2", text=SPEC + "\n# revision 2\n")
        second = _loaded(
            workflowrun(
                NAME,
                ref_2,
                digest_2,
                backend={"name": PIN.name},
                cache={"enabled": False},
                canary={"weight": 50, "analysis": ANALYSIS},
            )
        )
        api.call(lambda c: c.apply_workflowrun(second, namespace=namespace, field_manager="test"))
        obj = api.wait(namespace, NAME, _revision_settled(2), timeout=300, message="revision 2")
        yield Deployed(stack, namespace, obj, before, answered(model_server))
    finally:
        api.close()


def _loaded(manifest: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(manifest)
    return loaded


@pytest.fixture
async def client(deployed: Deployed) -> AsyncIterator[PlntClient]:
    async with PlntClient.from_kubeconfig(deployed.stack.server.kubeconfig) as api:
        yield api


# -- a: the deploy ------------------------------------------------------------------------


def test_a_deploy_on_the_model_smoke_tests_and_analyses_the_canary_on_it_then_promotes_it(
    deployed: Deployed,
) -> None:
    obj = deployed.obj
    status = obj["status"]
    assert (status["revision"], status["backend"]) == (2, PIN.name)
    ready = condition_of(obj, "Ready")
    assert ready is not None and ready["status"] == "True", ready
    smoke, analyze = step_of(obj, "smoke"), step_of(obj, "analyze")
    assert smoke is not None and smoke["state"] == "Succeeded", smoke
    assert analyze is not None and analyze["state"] == "Succeeded", analyze
    assert "analysis passed: 4 requests" in analyze.get("message", ""), analyze
    promote = step_of(obj, "promote")
    assert promote is not None and promote["state"] == "Succeeded", promote
    # Every smoke call and every analysis request reached the model (no step cache): one
    # smoke test of the canary, four requests to each of canary and stable.
    assert deployed.answered_after - deployed.answered_before >= 1 + 2 * ANALYSIS["requests"]


# -- b: a stream through the proxy ----------------------------------------------------------


@dataclass
class Streamed:
    """An SSE answer as it arrived: its events, and the read each event came in."""

    status: int
    events: list[Any]
    reads: list[int]

    @property
    def text(self) -> str:
        return "".join(
            event["choices"][0]["text"]
            for event in self.events
            if isinstance(event, dict) and event.get("choices")
        )

    def token_reads(self) -> list[int]:
        return [
            read
            for event, read in zip(self.events, self.reads, strict=True)
            if isinstance(event, dict) and event.get("choices") and event["choices"][0]["text"]
        ]


def proxy_url(client: PlntClient, namespace: str, path: str) -> str:
    base = client.object_path("workflowruns", NAME, namespace=namespace, subresource="proxy")
    return f"{client.connection.server}{base}{path}"


@contextlib.asynccontextmanager
async def http(client: PlntClient) -> AsyncIterator[aiohttp.ClientSession]:
    """A session that authenticates as the kubeconfig's user (the admin certificate)."""
    connector = aiohttp.TCPConnector(ssl=transport.ssl_context(client.connection))
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=120)
    ) as session:
        yield session


async def stream_completion(
    session: aiohttp.ClientSession,
    url: str,
    *,
    on_first_token: Any = None,
    direct: bool = False,
) -> Streamed:
    """POST a streamed text completion; every SSE event with the number of the read it
    completed in (a proxy that buffered the answer would deliver it in one read). With
    `direct`, the same request as the run's step makes, for the model server itself."""
    body: dict[str, Any] = {
        "model": "continue",
        "prompt": COUNTING,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if direct:
        body |= {"model": PIN.name, "max_tokens": TOKENS, "temperature": 0, "seed": 0}
    events: list[Any] = []
    reads: list[int] = []
    pending = b""
    async with session.post(url, json=body) as answer:
        if answer.status != 200:
            return Streamed(answer.status, [await answer.text()], [0])
        read = 0
        async for chunk in answer.content.iter_any():
            read += 1
            pending += chunk
            *complete, pending = pending.split(b"\n\n")
            for raw in complete:
                data = raw.strip().removeprefix(b"data:").strip()
                if not data:
                    continue
                event = "[DONE]" if data == b"[DONE]" else codec.loads(data)
                events.append(event)
                reads.append(read)
                first = isinstance(event, dict) and event.get("choices")
                if first and on_first_token is not None and len(events) == 1:
                    on_first_token()
    return Streamed(200, events, reads)


async def test_a_completion_streamed_through_the_proxy_comes_token_by_token_with_the_servers_usage(
    deployed: Deployed, client: PlntClient, model_server: ModelServer
) -> None:
    direct = await asyncio.to_thread(complete, model_server, COUNTING, max_tokens=TOKENS, seed=0)
    async with http(client) as session:
        streamed = await stream_completion(
            session, proxy_url(client, deployed.namespace, "/v1/completions")
        )
    assert streamed.status == 200, streamed.events
    assert streamed.events[-1] == "[DONE]"
    tokens = streamed.token_reads()
    assert len(tokens) == TOKENS  # one event per token, as the model server sends them
    # The first token came in an earlier read than the end of the answer: it was relayed as
    # it was generated, not once the answer was complete.
    assert tokens[0] < streamed.reads[-1]
    assert len(set(tokens)) > 1
    assert streamed.text == direct["choices"][0]["text"]
    usage = streamed.events[-2]["usage"]
    assert {key: usage[key] for key in direct["usage"]} == direct["usage"]
    assert usage["source"] == "counted"


def both_ways(deployed: Deployed, client: PlntClient, server: ModelServer) -> tuple[str, str]:
    """The run's text completions through plnt's proxy, and the model server's own."""
    return proxy_url(
        client, deployed.namespace, "/v1/completions"
    ), f"{server.endpoint}/completions"


async def test_thirty_streams_in_a_row_through_the_proxy_are_as_whole_as_the_same_streams_direct(
    deployed: Deployed, client: PlntClient, model_server: ModelServer
) -> None:
    proxied, direct = both_ways(deployed, client, model_server)
    async with http(client) as session:
        reference = await stream_completion(session, direct, direct=True)
        assert len(reference.token_reads()) == TOKENS
        for index in range(30):
            through = await stream_completion(session, proxied)
            assert through.status == 200, through.events
            assert through.events[-1] == "[DONE]", (index, through.events[-3:])
            assert len(through.token_reads()) == len(reference.token_reads()), index
            assert through.text == reference.text, index
            if index % 3 == 2:  # alternating with the model server's own stream
                again = await stream_completion(session, direct, direct=True)
                assert again.text == reference.text


async def test_streams_through_the_proxy_stay_whole_while_others_stream_at_once(
    deployed: Deployed, client: PlntClient, model_server: ModelServer
) -> None:
    proxied, direct = both_ways(deployed, client, model_server)
    async with http(client) as session:
        reference = await stream_completion(session, direct, direct=True)
        for _ in range(3):
            answers = await asyncio.gather(
                *(stream_completion(session, proxied) for _ in range(3)),
                stream_completion(session, direct, direct=True),
            )
            for answer in answers:
                assert answer.status == 200 and answer.events[-1] == "[DONE]", answer.events
                assert len(answer.token_reads()) == TOKENS
                assert answer.text == reference.text


# -- c: /bench -----------------------------------------------------------------------------


async def test_a_streamed_bench_reports_time_to_first_token_and_tokens_per_second_of_the_model(
    deployed: Deployed, client: PlntClient
) -> None:
    path = client.object_path("workflowruns", NAME, namespace=deployed.namespace) + "/bench"
    spec = {
        "durationSeconds": 3,
        "concurrency": 1,
        "stream": True,
        "inputs": {"prefix": COUNTING},
        "timeoutSeconds": 60,
    }
    started = await client.request(
        "POST", path, json={"apiVersion": "plnt.work/v1", "kind": "Bench", "spec": spec}
    )
    assert started.status == 202
    bench_id = started.json()["metadata"]["name"]

    async def finished() -> dict[str, Any] | None:
        bench: dict[str, Any] = (await client.request("GET", path)).json()
        phase = (bench.get("status") or {}).get("phase")
        ours = bench["metadata"]["name"] == bench_id
        return bench if ours and phase in ("Succeeded", "Failed") else None

    bench = await eventually(finished, within=120, interval=0.2, what="the bench done")
    status = bench["status"]
    assert status["phase"] == "Succeeded", status
    (target,) = status["targets"]
    assert target["revision"] == 2 and target["url"].endswith("/invoke?stream=true")
    assert target["cache"] == "bypass"  # the default: the model is measured
    (result,) = status["results"]
    assert result["requests"] >= 1 and result["errorRate"] == 0
    first_token, latency = result["timeToFirstToken"], result["latency"]
    assert first_token is not None and 0 < first_token["p50Ms"] <= latency["p50Ms"]
    assert first_token["maxMs"] <= latency["maxMs"]
    per_second = result["tokensPerSecond"]
    assert per_second is not None and per_second > 0
    # Consistent with the token counts: every answer decoded TOKENS - 1 tokens after its
    # first within its latency, so the decode rate is at least that over the slowest one.
    assert per_second >= (TOKENS - 1) / (latency["maxMs"] / 1000.0)


# -- d: probing sees the load ----------------------------------------------------------------


@pytest.fixture
def probing_worker(deployed: Deployed) -> Iterator[WorkerProcess]:
    """A second worker that only probes (its task queue no saga uses), every 0.2 s."""
    with probing_worker_on(deployed.stack) as worker:
        yield worker


async def test_backend_probes_see_the_model_servers_load_while_requests_are_in_flight(
    deployed: Deployed, client: PlntClient, probing_worker: WorkerProcess
) -> None:
    path = client.object_path("plntbackends", PIN.name, namespace=deployed.namespace)

    async def probed() -> dict[str, Any]:
        status: dict[str, Any] = (await client.request("GET", path)).json().get("status") or {}
        return status

    async def idle() -> dict[str, Any] | None:
        status = await probed()
        return status if status.get("reachable") and status.get("inFlight") == 0 else None

    await eventually(idle, within=60, interval=0.1, what="a probe of the idle server")
    stop = asyncio.Event()

    async def load(session: aiohttp.ClientSession) -> None:
        url = proxy_url(client, deployed.namespace, "/v1/completions")
        while not stop.is_set():
            streamed = await stream_completion(session, url)
            assert streamed.status == 200, streamed.events

    async def busy() -> dict[str, Any] | None:
        status = await probed()
        return status if (status.get("inFlight") or 0) >= 1 else None

    async with http(client) as session:
        callers = [asyncio.create_task(load(session)) for _ in range(3)]
        try:
            seen = await eventually(busy, within=60, interval=0.1, what="the load probed")
        finally:
            stop.set()
            await asyncio.gather(*callers)
    # Three callers on a server that generates for one at a time: one runs, the rest wait;
    # the model list still answered at once, so the busy server is reachable.
    assert seen["reachable"] is True and seen["inFlight"] == 1
    assert seen["queueDepth"] >= 0
    await eventually(idle, within=60, interval=0.1, what="the probe after the load")


# -- e: the model server dies mid-stream -----------------------------------------------------


async def test_a_model_server_killed_mid_stream_ends_the_stream_with_an_error_and_comes_back(
    deployed: Deployed, client: PlntClient, model_server: ModelServer
) -> None:
    first = model_server.pid
    assert first is not None
    url = proxy_url(client, deployed.namespace, "/v1/completions")
    async with (
        supervising(model_server, what="model", backoff=Backoff(initial=0.05)) as watcher,
        http(client) as session,
    ):
        cut = await asyncio.wait_for(
            stream_completion(session, url, on_first_token=lambda: os.kill(first, signal.SIGKILL)),
            timeout=120,
        )
        await eventually(lambda: watcher.restarts == 1, within=120, what="the restart")
        assert model_server.pid not in (None, first)
        again = await stream_completion(session, url)
    # The caller got part of the answer, then a well-formed OpenAI error event, and no end.
    assert cut.status == 200
    assert len(cut.token_reads()) >= 1 and "[DONE]" not in cut.events
    error = cut.events[-1]["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["code"], int) and error["code"] >= 500
    # Restarted on its port: the same run answers again, whole.
    assert again.status == 200 and again.events[-1] == "[DONE]"
    assert len(again.token_reads()) == TOKENS
