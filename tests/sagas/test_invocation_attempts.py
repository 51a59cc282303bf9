"""`status.attempts` counts every call a runner received, whatever lost the one before.

The call activity (`plnt.sagas.invoking.activities`) runs in Temporal's `ActivityEnvironment`, whose
heartbeat details are what the test hands it: an attempt after a lost worker starts from
whatever that worker's SDK had sent, however stale. Replicas are aiohttp servers of this
process that record `status.attempts` as each call arrives, so "counted before a runner
could receive it" is what the replica saw; the API is a `PlntClient` over one Invocation
and one run in memory, applying the JSON patches `recording` sends (tests/deploy runs
the same against real processes, killing the worker).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import jsonpatch
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from plnt.client import errors as client_errors
from plnt.client import transport
from plnt.client.clients import PlntClient
from plnt.client.kubeconfig import Connection
from plnt.sagas.invoking import activities as invoking
from plnt.sagas.invoking import workflow as inv

JSON = {"Content-Type": "application/json"}
LATENCY = 0.05
REF = inv.InvocationRef("ns", "i", "uid-1")
CALL = inv.CallRequest(inv.InvocationRequest(REF, "r", "run-uid", {"q": "?"}))


class MemoryApi(PlntClient):
    """One Invocation and one run in memory; status patches applied as the server would.

    Each request takes `LATENCY` seconds, as a round trip to a server does, so a call
    sent alongside a status write reaches its replica before the write lands.
    `lose_answers`: that many patches are applied but answered with a `TransportError`,
    as when the connection broke after the server wrote.
    """

    def __init__(self) -> None:
        super().__init__(Connection(server="https://127.0.0.1:9"))
        self.invocation: dict[str, Any] = {
            "metadata": {"name": REF.name, "namespace": REF.namespace, "uid": REF.uid},
            "status": {"phase": "Pending"},
        }
        self.endpoints: list[str] = []
        self.written: list[Any] = []
        """`attempts` as each status write left it (None: absent)."""
        self.lose_answers = 0

    @property
    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.invocation["status"]
        return status

    async def request(self, method: str, path: str, **options: Any) -> Any:
        await asyncio.sleep(LATENCY)
        if "/workflowruns/" in path:
            return answer(self.run())
        if method == "GET":
            return answer(self.invocation)
        self.invocation["metadata"]["generation"] = 1
        self.invocation = jsonpatch.apply_patch(self.invocation, options["json"])
        self.written.append(self.status.get("attempts"))
        if self.lose_answers:
            self.lose_answers -= 1
            raise client_errors.TransportError("the connection broke before the answer")
        return answer(self.invocation)

    def run(self) -> dict[str, Any]:
        return {
            "metadata": {"name": "r", "namespace": REF.namespace, "uid": "run-uid"},
            "status": {
                "revision": 1,
                "traffic": [{"revision": 1, "weight": 100, "endpoints": self.endpoints}],
            },
        }


def answer(body: dict[str, Any]) -> transport.Response:
    return transport.Response(200, JSON, json.dumps(body).encode())


class Replica:
    """A runner replica: `/readyz` (200 unless not `ready`), and a streamed `/invoke` that
    records the Invocation's `status.attempts` as the call arrives, sends the first
    step's line, then the answer, or (`dies`) ends the stream without one."""

    def __init__(self, api: MemoryApi, *, dies: bool = False, ready: bool = True) -> None:
        self.api, self.dies, self.ready = api, dies, ready
        self.seen: list[Any] = []
        app = web.Application()
        app.router.add_get("/readyz", self.readyz)
        app.router.add_post("/invoke", self.invoke)
        self.server = TestServer(app, host="127.0.0.1")

    @property
    def url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    async def readyz(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready else 503)

    async def invoke(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(self.api.status.get("attempts"))
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": invoking.NDJSON})
        await response.prepare(request)
        step = {"type": "step", "step": {"id": "first"}, "output": "one"}
        await response.write(json.dumps(step).encode() + b"\n")
        if not self.dies:
            result = {"type": "result", "output": {"first": "one"}, "trace": []}
            await response.write(json.dumps(result).encode() + b"\n")
        return response


class Vanishing:
    """A replica that answers one `/readyz` and stops listening at once: the call that
    follows is refused (no runner received it)."""

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.server.close()  # the listening socket goes before the answer does
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


class Call:
    """The real call activity on `api`, one attempt at a time, its heartbeats kept."""

    def __init__(self, api: MemoryApi) -> None:
        self.activities = invoking.InvocationActivities(api=api)
        self.beats: list[dict[str, Any]] = []

    async def attempt(self, number: int = 1, details: dict[str, Any] | None = None) -> inv.Called:
        """Attempt `number`, started from `details` (what the SDK had sent before)."""
        environment = ActivityEnvironment()
        environment.info = dataclasses.replace(
            environment.info,
            attempt=number,
            heartbeat_details=[details] if details is not None else [],
        )
        environment.on_heartbeat = lambda *given: self.beats.append(given[0])
        called: inv.Called = await environment.run(self.activities.call, CALL)
        return called


@pytest.fixture
def api() -> MemoryApi:
    return MemoryApi()


@pytest.fixture
async def call(api: MemoryApi) -> AsyncIterator[Call]:
    made = Call(api)
    try:
        yield made
    finally:
        await made.activities.close()


@pytest.fixture
async def replicas(api: MemoryApi) -> AsyncIterator[list[Replica]]:
    """Replicas the test makes (`replicas.append(Replica(api, …))`), started on first use
    by `serve`, all closed when it ends."""
    made: list[Replica] = []
    try:
        yield made
    finally:
        for replica in made:
            await replica.server.close()


async def serve(api: MemoryApi, replicas: list[Replica], **behaviour: bool) -> Replica:
    replica = Replica(api, **behaviour)
    replicas.append(replica)
    await replica.server.start_server()
    return replica


async def test_a_call_is_counted_in_status_before_the_runner_receives_it(
    api: MemoryApi, call: Call, replicas: list[Replica]
) -> None:
    replica = await serve(api, replicas)
    api.endpoints = [replica.url]
    called = await call.attempt()
    assert replica.seen == [1]
    assert called.attempts == 1 and api.status["attempts"] == 1
    assert api.status["phase"] == "Succeeded"


@pytest.mark.parametrize("sent", ["nothing", "the first heartbeat", "every heartbeat"])
async def test_an_attempt_after_a_lost_one_counts_on_from_status_whatever_the_heartbeat_kept(
    api: MemoryApi, call: Call, replicas: list[Replica], sent: str
) -> None:
    lost = await serve(api, replicas, dies=True)
    api.endpoints = [lost.url]
    with pytest.raises(ApplicationError) as failed:
        await call.attempt()
    assert failed.value.type == inv.Reason.RUNNER_LOST
    kept = {
        "nothing": None,
        "the first heartbeat": call.beats[0],
        "every heartbeat": call.beats[-1],
    }
    survivor = await serve(api, replicas)
    api.endpoints = [survivor.url]
    called = await call.attempt(2, kept[sent])
    assert (lost.seen, survivor.seen) == ([1], [2])
    assert called.attempts == 2 and api.status["attempts"] == 2


async def test_every_replica_called_within_one_attempt_counts(
    api: MemoryApi, call: Call, replicas: list[Replica]
) -> None:
    lost, survivor = await serve(api, replicas, dies=True), await serve(api, replicas)
    api.endpoints = [lost.url, survivor.url]
    called = await call.attempt()
    assert (lost.seen, survivor.seen) == ([1], [2])
    assert called.attempts == 2 and called.endpoint == survivor.url


async def test_a_replica_not_ready_or_refusing_the_connection_counts_no_call(
    api: MemoryApi, call: Call, replicas: list[Replica]
) -> None:
    asleep = await serve(api, replicas, ready=False)
    vanishing = Vanishing()
    gone = await vanishing.start()
    survivor = await serve(api, replicas)
    api.endpoints = [asleep.url, gone, survivor.url]
    called = await call.attempt()
    assert (asleep.seen, survivor.seen) == ([], [1])
    assert called.attempts == 1 and api.status["attempts"] == 1
    assert api.written[:3] == [1, None, 1]  # counted, taken back, counted for the survivor


async def test_a_call_taken_back_stays_uncounted_when_a_heartbeat_had_counted_it(
    api: MemoryApi, call: Call, replicas: list[Replica]
) -> None:
    vanishing = Vanishing()
    api.endpoints = [await vanishing.start()]
    with pytest.raises(ApplicationError) as failed:
        await call.attempt()
    assert failed.value.type == inv.Reason.RUNNER_LOST
    assert "attempts" not in api.status
    counted = {**call.beats[-1], "tries": 1}  # what the SDK sent before the take-back
    replica = await serve(api, replicas)
    api.endpoints = [replica.url]
    called = await call.attempt(2, counted)
    assert replica.seen == [1] and called.attempts == 1


async def test_an_attempt_that_found_no_ready_replica_counts_no_call(
    api: MemoryApi, call: Call, replicas: list[Replica]
) -> None:
    with pytest.raises(ApplicationError) as failed:
        await call.attempt()  # the run lists no ready replica yet
    assert failed.value.type == inv.Reason.NOT_READY
    assert "attempts" not in api.status
    replica = await serve(api, replicas)
    api.endpoints = [replica.url]
    called = await call.attempt(2)
    assert replica.seen == [1] and called.attempts == 1


async def test_a_count_whose_answer_was_lost_is_written_again_and_the_call_counted_once(
    api: MemoryApi, call: Call, replicas: list[Replica]
) -> None:
    replica = await serve(api, replicas)
    api.endpoints = [replica.url]
    api.lose_answers = 1  # the Running write lands, its answer does not
    called = await call.attempt()
    assert api.written[:2] == [1, 1]
    assert replica.seen == [1] and called.attempts == 1
