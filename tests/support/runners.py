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
* `invoke(session, url, inputs)`: one `POST /invoke`, its (status, body);
  `invoke_answer(..., headers=...)` sends headers and adds the answer's, `invoked`
  asserts a 200 and gives the body.
* `openai_backend(endpoint, **options)`: an OpenAI-compatible backend serving model `m`;
  `failing_primary(port, breaker_failures=N)` one that is down, with a fallback;
  `budgeted_down_backend(port)` one that is down with a retry budget of two retries.
* `counter_sum(session, url, name)`: the sum of a counter's series on a runner's /metrics.

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
from typing import Any, NamedTuple

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


def openai_backend(endpoint: str, **options: Any) -> settings.BackendConfig:
    """An OpenAI-compatible backend at `endpoint` (`.../v1`) serving model `m`."""
    return settings.BackendConfig(type="openai", endpoint=endpoint, **{"model": "m", **options})


def failing_primary(
    port: int, *, breaker_failures: int, fallback: settings.BackendConfig | None = None
) -> settings.BackendConfig:
    """Backend `primary` on a loopback `port` nothing listens on: its breaker opens after
    `breaker_failures` failures, for 60 s, and sends calls to `fallback` (the echo backend
    `small` unless told)."""
    return openai_backend(
        f"http://127.0.0.1:{port}/v1",
        name="primary",
        breaker_failures=breaker_failures,
        breaker_open_seconds=60,
        fallback=fallback or settings.BackendConfig(type="echo", name="small"),
    )


def budgeted_down_backend(port: int) -> settings.BackendConfig:
    """Backend `down` on a loopback `port` nothing listens on, whose retry budget allows
    two retries in all (no ratio of calls adds more) and whose breaker never opens in a
    test: every call reaches it, and only the budget stops retries."""
    return openai_backend(
        f"http://127.0.0.1:{port}/v1",
        name="down",
        retry_budget_ratio=0.0,
        retry_budget_floor=2,
        breaker_failures=100,
    )


class Answer(NamedTuple):
    """What one `POST /invoke` answered."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]


async def invoke_answer(
    session: aiohttp.ClientSession,
    url: str,
    inputs: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
) -> Answer:
    """`POST URL/invoke` with `inputs`: its status, JSON body and headers."""
    async with session.post(f"{url}/invoke", json={"inputs": inputs}, headers=headers) as answer:
        return Answer(answer.status, await answer.json(), dict(answer.headers))


async def counter_sum(session: aiohttp.ClientSession, url: str, name: str) -> float:
    """The sum of the series of the counter `name` (a prefix, labels allowed) on the
    runner's /metrics."""
    async with session.get(f"{url}/metrics") as response:
        text = await response.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


async def invoke(
    session: aiohttp.ClientSession, url: str, inputs: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    """`POST URL/invoke` with `inputs`: its status and JSON body."""
    status, body, _ = await invoke_answer(session, url, inputs)
    return status, body


async def invoked(
    session: aiohttp.ClientSession, url: str, inputs: dict[str, Any]
) -> dict[str, Any]:
    """`POST URL/invoke` with `inputs`, which must answer 200: its JSON body."""
    async with session.post(f"{url}/invoke", json={"inputs": inputs}) as answer:
        text = await answer.text()
        assert answer.status == 200, text
        body: dict[str, Any] = json.loads(text)
        return body
