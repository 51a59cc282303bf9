"""The `plnt` CLI as a child process: run it, capture what it printed and how it exited.

`run_process(command, env=...)` runs a command to completion without blocking the event
loop that serves the API under test, killing and reaping the child past `CLI_TIMEOUT`;
`cli_env(home, kubeconfig)` is a clean environment (private HOME, that KUBECONFIG, the
venv first on PATH). `SERVE` is a minimal `plnt serve` command line for the tests that
parse flags without serving.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

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


SERVE = [
    "serve",
    "--tls-cert-file", "tls.crt",
    "--tls-private-key-file", "tls.key",
    "--etcd-servers", "https://etcd:2379",
    "--no-sagas",
]  # fmt: skip
