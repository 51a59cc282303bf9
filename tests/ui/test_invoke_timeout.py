"""The invoke form and the chat panel wait for a workflow as long as `plnt ui
--request-timeout` says, not the 30 s the UI's client allows every other call, and
reach the workflow through the run's `proxy` subresource (long-running in a cluster).

The API is a fake that holds the invocation until the test releases it; the test
releases it only once a call of the same client with its ordinary timeout has timed
out, so the invocation has visibly outlived that timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from plnt.client import Connection, PlntClient, TransportError
from plnt.processes.ports import free_port
from plnt.ui import app
from plnt.ui.settings import UiSettings

RUN = "/apis/plnt.work/v1/namespaces/a/workflowruns/r"
CLIENT_TIMEOUT = 0.3  # the UI client's timeout for every other call, shortened


@dataclass
class HeldApi:
    """A fake plnt API: the run's models answer at once, its invocations when released."""

    url: str = ""
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        async def models(request: web.Request) -> web.Response:
            facts = {"inputs": {"type": "object", "properties": {"q": {"type": "string"}}},
                     "chatInput": "q"}  # fmt: skip
            return web.json_response({"object": "list", "data": [{"id": "r", "plnt": facts}]})

        async def invoke(request: web.Request) -> web.StreamResponse:
            self.arrived.set()
            await self.release.wait()
            headers = {"X-Plnt-Revision": "1", "X-Plnt-Cache": "off"}
            if request.query.get("stream") != "true":
                return web.json_response({"output": "late", "trace": []}, headers=headers)
            response = web.StreamResponse(
                headers={**headers, "Content-Type": "application/x-ndjson"}
            )
            await response.prepare(request)
            await response.write(b'{"type":"delta","step":"a","content":"late"}\n')
            await response.write(b'{"type":"result","output":"late"}\n')
            await response.write_eof()
            return response

        async def held(request: web.Request) -> web.Response:
            await self.release.wait()
            return web.json_response({})

        api = web.Application()
        api.router.add_get(f"{RUN}/proxy/v1/models", models)
        api.router.add_post(f"{RUN}/proxy/invoke", invoke)
        api.router.add_get("/held", held)
        return api


@pytest.fixture
async def held_api() -> AsyncIterator[HeldApi]:
    api = HeldApi()
    server = TestServer(api.app(), host="127.0.0.1")
    await server.start_server()
    api.url = str(server.make_url("")).rstrip("/")
    try:
        yield api
    finally:
        api.release.set()
        await server.close()


async def answered_after_the_client_timeout(
    held_api: HeldApi, path: str, body: dict[str, object]
) -> tuple[int, bytes]:
    """POST `path` to a UI whose client has `CLIENT_TIMEOUT`; its status and body."""
    api = PlntClient(Connection(server=held_api.url, namespace="a"), timeout=CLIENT_TIMEOUT)
    settings = UiSettings(port=free_port(), invoke_timeout_seconds=30.0)
    server = TestServer(app.build_app(settings, api), host="127.0.0.1", port=settings.port)
    await server.start_server()
    async with TestClient(server) as ui:
        await ui.get(f"/?token={settings.token}", allow_redirects=False)
        headers = {
            "Origin": f"http://127.0.0.1:{settings.port}",
            "X-CSRF-Token": settings.csrf_token,
        }

        async def post() -> tuple[int, bytes]:
            async with ui.post(path, json=body, headers=headers) as answer:
                return answer.status, await answer.read()

        posted = asyncio.create_task(post())
        try:
            async with asyncio.timeout(10):
                await held_api.arrived.wait()
            with pytest.raises(TransportError, match="timed out"):
                await api.request("GET", "/held")  # the same client, its own timeout
            held_api.release.set()
            async with asyncio.timeout(10):
                return await posted
        finally:
            posted.cancel()


async def test_the_invoke_form_waits_longer_than_the_clients_timeout_for_the_answer(
    held_api: HeldApi,
) -> None:
    status, body = await answered_after_the_client_timeout(
        held_api, "/act/ns/a/runs/r/invoke", {"values": {"q": "x"}}
    )
    assert status == 200, body
    assert b'"output": "late"' in body and b'"revision": "1"' in body


async def test_the_chat_panel_waits_longer_than_the_clients_timeout_for_the_reply(
    held_api: HeldApi,
) -> None:
    status, body = await answered_after_the_client_timeout(
        held_api, "/act/ns/a/runs/r/chat", {"message": "x", "input": "q"}
    )
    assert status == 200, body
    assert body.splitlines() == [
        b'{"type":"delta","step":"a","content":"late"}',
        b'{"type":"result","output":"late"}',
    ]
