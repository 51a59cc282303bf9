"""Fixtures for runner tests: runners on real loopback ports, a session, helper servers.

`start_runner` builds the real app with `build_app` and serves it with aiohttp's test
server on 127.0.0.1 and a free port; everything started is closed when the test ends.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from plnt.runner import app as runner_app
from plnt.runner import settings

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

StartRunner = Callable[..., Awaitable[str]]


@pytest.fixture
async def start_runner() -> AsyncIterator[StartRunner]:
    """`await start_runner(spec_path, backend=BackendConfig(...), **settings)` -> base URL."""
    servers: list[TestServer] = []

    async def start(
        spec: Path, *, backend: settings.BackendConfig | None = None, **options: Any
    ) -> str:
        runner_settings = settings.RunnerSettings(
            spec_path=spec, backend=backend or settings.BackendConfig(), **options
        )
        server = TestServer(runner_app.build_app(runner_settings), host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return str(server.make_url("")).rstrip("/")

    try:
        yield start
    finally:
        for server in reversed(servers):
            await server.close()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session for talking to runners."""
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[[str], Path]:
    """Write YAML text to a fresh spec file and return its path."""
    counter = iter(range(1000))

    def write(text: str) -> Path:
        path = tmp_path / f"spec-{next(counter)}.yaml"
        path.write_text(text)
        return path

    return write


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def hanging_server() -> AsyncIterator[str]:
    """An HTTP server that accepts requests and never answers: a backend that hangs."""
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        release.set()
        await server.close()
