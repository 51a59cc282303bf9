"""kube-apiserver's request timeout in the stand-in: which requests are long-running,
kube's 504 before the answer started, a killed connection after, and `?timeout=`.

The proxied backend is a real HTTPS server on this test's loop; its handlers wait for
the test to release them, so every deadline below is crossed while they wait. That a
long-running request outlived the limit is proven, without a clock, by a request that
was sent after it and got the 504 first.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.support import tls
from tests.support.kube import attributes, policy, standin, timeouts
from tests.support.kube.backends import backend_context
from tests.support.kube.clients import session

BASE = "/apis/plnt.work/v1/namespaces/ns/echoes"
LIMIT = 0.5  # seconds: the shortened --request-timeout of these tests


@dataclass
class SlowBackend:
    """What the backend saw: arrivals per path, and requests whose caller went away."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: Counter[str] = field(default_factory=Counter)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    abandoned: int = 0

    async def note(self, path: str) -> None:
        async with self.changed:
            self.arrived[path] += 1
            self.changed.notify_all()

    async def until_arrived(self, path: str, count: int = 1) -> None:
        async with asyncio.timeout(10), self.changed:
            await self.changed.wait_for(lambda: self.arrived[path] >= count)

    async def until_abandoned(self) -> None:
        async with asyncio.timeout(10), self.changed:
            await self.changed.wait_for(lambda: self.abandoned > 0)

    def app(self) -> web.Application:
        async def held(request: web.Request) -> web.StreamResponse:
            await self.note(request.path)
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                async with self.changed:
                    self.abandoned += 1
                    self.changed.notify_all()
                raise
            return web.json_response({"kind": "Echo", "path": request.path_qs})

        async def started(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
            await response.prepare(request)
            await response.write(b'{"type":"step"}\n')
            await self.note(request.path)
            await self.release.wait()
            await response.write(b'{"type":"result"}\n')
            await response.write_eof()
            return response

        app = web.Application(handler_args={"handler_cancellation": True})
        app.router.add_get("/apis/plnt.work/v1", self.discovery)
        app.router.add_post(f"{BASE}/x/stream", started)
        app.router.add_route("*", "/apis/plnt.work/v1/{tail:.+}", held)
        return app

    async def discovery(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "plnt.work/v1",
             "resources": []}
        )  # fmt: skip


@pytest.fixture
async def slow(
    kube: standin.KubeStandIn, token: str, tmp_path: Path
) -> AsyncIterator[tuple[SlowBackend, aiohttp.ClientSession]]:
    """The slow backend registered as v1.plnt.work, and a session of a user who may do
    anything in it; requests are cut after `LIMIT` seconds."""
    kube.add_user(token, "tim")
    kube.allow(policy.Rule(("*",), user="tim", api_groups=("plnt.work",), resources=("*",)))
    backend = SlowBackend()
    context, ca_bundle = backend_context(kube, tmp_path)
    async with tls.serve_https(backend.app(), context) as url:
        service = await kube.register_apiservice_async(url, ca_bundle, service_name="echo-api")
        assert service.available, service.unavailable_reason
        try:
            with kube.requests_cut_after(LIMIT):
                async with session(kube, token) as client:
                    yield backend, client
        finally:
            backend.release.set()
            kube.unregister_apiservice()


@pytest.mark.parametrize(
    ("method", "path", "long_running"),
    [
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns?watch=true", True),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns?watch=1", True),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns?watch=", True),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns?watch=False", False),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns?watch=0", False),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns/x?watch=true", False),
        ("GET", "/apis/plnt.work/v1/watch/namespaces/ns/workflowruns", True),
        ("GET", "/api/v1/proxy/namespaces/ns/pods/p", True),
        ("POST", "/apis/plnt.work/v1/namespaces/ns/workflowruns/x/proxy/invoke", True),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns/x/proxy/v1/models", True),
        ("GET", "/api/v1/namespaces/ns/services/s/proxy/metrics", True),
        ("GET", "/api/v1/namespaces/ns/pods/p/log", True),
        ("POST", "/api/v1/namespaces/ns/pods/p/exec", True),
        ("POST", "/api/v1/namespaces/ns/pods/p/attach", True),
        ("POST", "/api/v1/namespaces/ns/pods/p/portforward", True),
        ("GET", "/debug/pprof/profile", True),
        ("POST", "/apis/plnt.work/v1/namespaces/ns/workflowruns/x/invoke", False),
        ("POST", "/apis/plnt.work/v1/namespaces/ns/workflowruns/x/bench", False),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns/x/invocationlog", False),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns/x/invocationlog?watch=1", False),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns/x/invocations?watch=1", False),
        ("POST", "/apis/plnt.work/v1/namespaces/ns/invocations", False),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/invocations?watch=1", True),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns", False),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/workflowruns/proxy", False),
        ("GET", "/apis", False),
        ("GET", "/openapi/v3/apis/plnt.work/v1", False),
    ],
)
def test_only_watches_proxies_and_kubes_streaming_subresources_are_long_running(
    method: str, path: str, long_running: bool
) -> None:
    bare, _, query = path.partition("?")
    pairs = dict(pair.partition("=")[::2] for pair in query.split("&") if pair)
    attrs = attributes.request_attributes(attributes.ANONYMOUS, method, bare, pairs)
    assert timeouts.is_long_running(attrs) is long_running


def test_go_durations_parse_as_go_parses_them_and_fail_with_gos_words() -> None:
    assert timeouts.parse_go_duration("32s") == 32
    assert timeouts.parse_go_duration("1m30s") == 90
    assert timeouts.parse_go_duration("1.5h") == 5400
    assert timeouts.parse_go_duration("250ms") == pytest.approx(0.25)
    assert timeouts.parse_go_duration("-2s") == -2
    assert timeouts.parse_go_duration("0") == 0
    for text, message in (
        ("soon", 'time: invalid duration "soon"'),
        ("", 'time: invalid duration ""'),
        ("5", 'time: missing unit in duration "5"'),
        ("5d", 'time: unknown unit "d" in duration "5d"'),
    ):
        with pytest.raises(ValueError, match="^" + message.replace(".", r"\.") + "$"):
            timeouts.parse_go_duration(text)


async def test_a_request_that_is_not_long_running_gets_kubes_504_if_nothing_was_written_in_time(
    slow: tuple[SlowBackend, aiohttp.ClientSession],
) -> None:
    backend, client = slow
    began = time.monotonic()
    async with client.post(f"{BASE}/x/invoke", json={"inputs": {}}) as response:
        body = await response.read()
    took = time.monotonic() - began
    assert response.status == 504
    assert body == (
        b'{"metadata":{},"status":"Failure","message":"Timeout: request did not complete '
        b'within the allotted timeout","reason":"Timeout","details":{},"code":504}\n'
    )
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert response.headers["Cache-Control"] == "no-cache, private"
    assert took >= LIMIT
    await backend.until_abandoned()  # the backend's connection went away with the deadline


async def test_an_answer_that_started_in_time_is_cut_by_killing_the_connection_at_the_deadline(
    slow: tuple[SlowBackend, aiohttp.ClientSession],
) -> None:
    _, client = slow
    async with client.post(f"{BASE}/x/stream", json={}) as response:
        assert response.status == 200
        assert await response.content.readline() == b'{"type":"step"}\n'
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()


async def test_watches_and_proxy_subresources_outlive_the_limit_that_cuts_other_requests(
    slow: tuple[SlowBackend, aiohttp.ClientSession],
) -> None:
    backend, client = slow

    async def call(method: str, path: str) -> tuple[int, bytes]:
        async with client.request(method, path) as response:
            return response.status, await response.read()

    long_running = {
        "proxy subresource": asyncio.create_task(call("POST", f"{BASE}/x/proxy/invoke")),
        "watch": asyncio.create_task(call("GET", f"{BASE}?watch=true")),
    }
    try:
        await backend.until_arrived(f"{BASE}/x/proxy/invoke")
        await backend.until_arrived(BASE)
        # Sent after both, cut at the limit: by then both have been held longer.
        assert (await call("POST", f"{BASE}/x/invoke"))[0] == 504
        backend.release.set()
        answers = {name: await task for name, task in long_running.items()}
    finally:
        for task in long_running.values():
            task.cancel()
    assert {name: status for name, (status, _) in answers.items()} == {
        "proxy subresource": 200,
        "watch": 200,
    }


async def test_a_shorter_client_timeout_cuts_sooner_and_a_longer_one_extends_nothing(
    kube: standin.KubeStandIn, slow: tuple[SlowBackend, aiohttp.ClientSession]
) -> None:
    _, client = slow
    async with asyncio.timeout(10):  # a request the limit failed to cut would hang here
        async with client.post(f"{BASE}/x/invoke?timeout=10m", json={}) as response:
            assert response.status == 504
        with kube.requests_cut_after(timeouts.DEFAULT_REQUEST_TIMEOUT):
            async with client.post(f"{BASE}/x/invoke?timeout=300ms", json={}) as response:
                assert response.status == 504
            async with client.post(f"{BASE}/x/invoke?timeout=soon", json={}) as response:
                refused = await response.json()
    assert response.status == 400
    assert refused["reason"] == "BadRequest"
    assert refused["message"] == (
        'invalid timeout specified in the request URL - time: invalid duration "soon"'
    )


def test_the_limit_is_kubes_sixty_seconds_unless_configured(kube: standin.KubeStandIn) -> None:
    assert kube.request_timeout == 60.0
    with kube.requests_cut_after(2.0):
        assert kube.request_timeout == 2.0
    assert kube.request_timeout == 60.0
