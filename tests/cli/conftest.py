"""The `plnt` CLI as a child process against the in-process API server of tests/client.

`cli` runs `python -m plnt.cli ARGS` with its own HOME and KUBECONFIG (a kubeconfig
for the test's server, context namespace = the test's namespace) without blocking
the event loop that serves the API; the child is killed and reaped on timeout or
failure.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.client.conftest import (  # noqa: F401  (fixtures shared with tests/client)
    admin_kubeconfig,
    client,
    etcd_endpoint,
    namespace,
    runner_url,
    server,
)

CLI_TIMEOUT = 120.0


@dataclass(frozen=True)
class Result:
    """What a CLI run printed and how it exited."""

    code: int
    stdout: str
    stderr: str


Cli = Callable[..., Awaitable[Result]]


async def run_process(
    command: list[str],
    *,
    env: Mapping[str, str],
    stdin: str | None = None,
    cwd: Path | None = None,
) -> Result:
    """Run `command` to completion (killing it past the deadline) and capture its output."""
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
    )
    try:
        async with asyncio.timeout(CLI_TIMEOUT):
            out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


def cli_env(home: Path, kubeconfig: Path | None, **extra: str) -> dict[str, str]:
    """A clean environment: private HOME, the given KUBECONFIG, the venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "COLUMNS")}
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    env.update(extra)
    return env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli(admin_kubeconfig: Path, home: Path) -> Cli:  # noqa: F811
    """`await cli("list", "-o", "json")` → Result; `env=` replaces the environment."""

    async def run(
        *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> Result:
        environment = env if env is not None else cli_env(home, admin_kubeconfig)
        return await run_process(
            [sys.executable, "-m", "plnt.cli", *args], env=environment, stdin=stdin
        )

    return run
