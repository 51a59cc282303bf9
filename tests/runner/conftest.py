"""Fixtures of the runner tests alone: a backend that hangs.

Runners themselves (`start_runner`, `session`, `write_spec`, `closed_port`) come from
`tests/support/runners.py`, registered for the whole suite by `tests/conftest.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer


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
