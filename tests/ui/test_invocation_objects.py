"""The Run page lists the run's Invocations (the kind) live, and each has a page with its
output or error and its step trace, which follows the object too.

A real API server on a real etcd, without sagas: the status writes a worker would make
are made here through the status subresource, so the test decides what the UI must
show. The UI is the real app with a client of that server; its pages are read as HTML
and its live feed as the Server-Sent Events a browser would receive.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from plnt.client import Connection, PlntClient
from plnt.processes.ports import free_port
from plnt.ui import app
from plnt.ui.settings import UiSettings
from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.etcd import etcd_endpoint_fixture
from tests.support.invocations import INVOCATIONS, invocation, set_status

# The server of the API server tests (tests/support/api_server.py), on an etcd of its own.
etcd_endpoint = etcd_endpoint_fixture()

RUN_PAGE = "/ns/default/runs/summarize"


@dataclass
class Ui:
    client: TestClient[Any, Any]
    api: Api


@pytest.fixture
async def ui(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Ui]:
    async with serving(etcd_endpoint, tmp_path) as api:
        assert (await api.call("POST", BASE, body=workflowrun("summarize"))).status == 201
        connection = Connection(
            server=api.url,
            namespace="default",
            ca_data=api.pki.ca_cert.read_bytes(),
            client_certificate_data=api.pki.admin_cert.read_bytes(),
            client_key_data=api.pki.admin_key.read_bytes(),
        )
        settings = UiSettings(port=free_port())
        server = TestServer(
            app.build_app(settings, PlntClient(connection)), host="127.0.0.1", port=settings.port
        )
        await server.start_server()
        async with TestClient(server) as client:
            await client.get(f"/?token={settings.token}", allow_redirects=False)
            yield Ui(client, api)


async def create(api: Api, name: str) -> None:
    assert (await api.call("POST", INVOCATIONS, body=invocation(name))).status == 201


async def page(ui: Ui, path: str) -> str:
    answer = await ui.client.get(path)
    text = await answer.text()
    assert answer.status == 200, text
    return text


class Feed:
    """A page's live stream as the browser's EventSource reads it."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def until(
        self, element: str, found: Callable[[str], bool], *, within: float = 15.0
    ) -> str:
        """The first `replace` of `element` whose HTML satisfies `found`."""
        async with asyncio.timeout(within):
            while True:
                line = (await self.response.content.readline()).decode()
                if not line.startswith("data: "):
                    continue
                message = json.loads(line.removeprefix("data: "))
                assert "error" not in message, message
                html = (message.get("replace") or {}).get(element)
                if html is not None and found(html):
                    return str(html)


@pytest.fixture
async def feed(ui: Ui) -> Callable[[str], Any]:
    opened: list[aiohttp.ClientResponse] = []

    async def open_feed(path: str) -> Feed:
        response = await ui.client.get("/live" + path)
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        opened.append(response)
        return Feed(response)

    yield open_feed
    for response in opened:
        response.close()


async def test_the_run_page_lists_its_invocations_and_the_feed_follows_their_phases(
    ui: Ui, feed: Callable[[str], Any]
) -> None:
    await create(ui.api, "first")
    html = await page(ui, RUN_PAGE)
    assert 'data-invocation="first"' in html and "Pending" in html
    assert 'href="/ns/default/invocations/first"' in html
    assert "invocation log" in html  # the log of direct calls is still linked

    live = await feed(RUN_PAGE)
    await live.until("run-invocations", lambda h: 'data-invocation="first"' in h)
    await create(ui.api, "second")
    listed = await live.until("run-invocations", lambda h: 'data-invocation="second"' in h)
    assert listed.index('"second"') < listed.index('"first"')  # newest first

    await set_status(
        ui.api, "first", {"phase": "Running", "revision": 3, "startTime": "2026-07-01T10:00:00Z"}
    )
    await live.until("run-invocations", lambda h: "phase-running" in h and "r3" in h)
    await set_status(
        ui.api,
        "first",
        {
            "phase": "Succeeded",
            "completionTime": "2026-07-01T10:00:41Z",
            "usage": {"promptTokens": 700, "completionTokens": 112, "totalTokens": 812},
        },
    )
    done = await live.until("run-invocations", lambda h: "phase-succeeded" in h)
    row = done[done.index('data-invocation="first"') :].split("</tr>")[0]
    assert "41 s" in row and "812" in row and "r3" in row

    await ui.api.call("DELETE", f"{INVOCATIONS}/second")
    await live.until("run-invocations", lambda h: '"second"' not in h)


async def test_an_invocations_page_shows_its_output_and_step_trace(ui: Ui) -> None:
    await create(ui.api, "done")
    await set_status(
        ui.api, "done", {"phase": "Running", "revision": 2, "startTime": "2026-07-01T10:00:00Z"}
    )
    await set_status(
        ui.api,
        "done",
        {
            "phase": "Succeeded",
            "completionTime": "2026-07-01T10:00:03Z",
            "output": {"summary": "etcd is a <b>raft</b> store"},
            "attempts": 2,
            "trace": [
                {"id": "fetch", "kind": "http", "durationMs": 120.0, "attempts": 1,
                 "resumed": True},
                {"id": "summarize", "kind": "llm", "cache": "miss", "durationMs": 2400.5,
                 "backendMs": 2300.0, "attempts": 1},
            ],
        },
    )  # fmt: skip
    html = await page(ui, "/ns/default/invocations/done")
    assert "etcd is a &lt;b&gt;raft&lt;/b&gt; store" in html  # the API's text, escaped
    assert "Succeeded" in html and "r2" in html and "attempts 2" in html
    trace = html[html.index('data-testid="invocation-trace"') :]
    assert "fetch" in trace and "resumed" in trace
    assert "summarize" in trace and "2400.5 ms" in trace and "2300.0 ms" in trace
    assert 'href="/ns/default/runs/summarize"' in html


async def test_an_invocations_page_follows_it_until_it_fails_with_the_error(
    ui: Ui, feed: Callable[[str], Any]
) -> None:
    await create(ui.api, "doomed")
    html = await page(ui, "/ns/default/invocations/doomed")
    assert "Pending" in html and "No output yet" in html
    live = await feed("/ns/default/invocations/doomed")
    await live.until("invocation-detail", lambda h: "Pending" in h)
    await set_status(
        ui.api, "doomed", {"phase": "Running", "revision": 1, "startTime": "2026-07-01T10:00:00Z"}
    )
    await set_status(
        ui.api,
        "doomed",
        {
            "phase": "Failed",
            "completionTime": "2026-07-01T10:00:05Z",
            "error": {"reason": "StepFailed", "message": "backend said no", "step": "summarize"},
        },
    )
    failed = await live.until("invocation-detail", lambda h: "phase-failed" in h)
    assert "StepFailed" in failed and "backend said no" in failed and "step summarize" in failed


async def test_a_missing_invocation_is_a_404_page(ui: Ui) -> None:
    answer = await ui.client.get("/ns/default/invocations/nowhere")
    assert answer.status == 404
    assert "nowhere" in await answer.text()
