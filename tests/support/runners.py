"""Runners for tests: in-process on a real loopback port, or `python -m plnt.runner` as a child.

* `start_runner` (fixture): `await start_runner(spec_path, backend=BackendConfig(...),
  **settings)` builds the real app with `build_app`, serves it with aiohttp's test
  server on 127.0.0.1 and a free port, and answers its base URL; every runner started
  is closed when the test ends.
* `session`, `write_spec`, `closed_port` (fixtures): a client session for talking to
  runners, spec files written from YAML text, a loopback port nothing listens on.
* `runner_process(*args)`: the runner module as a real child process on a free port,
  always killed and reaped.
* `read_lines(response)`: every line of an NDJSON invoke stream, parsed.

The fixtures are registered for the whole suite by `tests/conftest.py`: the runner, CLI
and model tests start their runners the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from plnt.runner import app as runner_app
from plnt.runner import settings

RUNNER_START_SECONDS = 30.0
STREAM_SECONDS = 20.0

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


@contextlib.asynccontextmanager
async def runner_process(*args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """Start the runner on a free port; yield it and its URL; always kill and reap it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "plnt.runner",
        *args,
        "--port",
        "0",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(RUNNER_START_SECONDS):
            line = (await process.stdout.readline()).decode()
        assert "listening on " in line, line
        yield process, line.rsplit(" ", 1)[1].strip()
    finally:
        if process.returncode is None:
            process.kill()
        await process.communicate()


async def read_lines(response: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    """Every line of a stream, parsed, until the server ends it."""
    lines = []
    async with asyncio.timeout(STREAM_SECONDS):
        while raw := await response.content.readline():
            lines.append(json.loads(raw))
    return lines
