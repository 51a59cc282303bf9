"""Child processes of the benchmarks: started, watched for a ready line, always reaped.

Every measured part (the API server, `plnt up`, the bare proxy, the runners) runs in its
own process, so the load generator never shares a core's event loop with what it
measures. They all announce readiness with one line on stdout (a server: `… listening on
URL`, read back as `Child.url`); `running_child` waits for it with a deadline and, on the
way out (also on failure), sends SIGTERM, waits, SIGKILLs if needed and reaps.
`running_runner` is that for a runner process of a spec, as every benchmark starts one;
`running_bare_proxy` for the bare proxy (`plnt.bench.bareproxy`), the floor under a hop.

Errors: `ChildFailed` (a `BenchmarkError`) when the child exits or is not ready in time; its
message carries the child's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from plnt.apiserver import pki
from plnt.bench.apiserver import BenchmarkError
from plnt.processes import tasks

REPO = Path(__file__).resolve().parents[2]


class ChildFailed(BenchmarkError):
    """A child exited before it was ready, or was not ready by the deadline."""


@dataclass
class Child:
    """A running child and everything it printed so far (stdout and stderr)."""

    process: asyncio.subprocess.Process
    output: list[str] = field(default_factory=list)

    @property
    def ready_line(self) -> str:
        """The line that announced readiness (the last line read when it came)."""
        return self.output[-1] if self.output else ""

    @property
    def url(self) -> str:
        """The URL a server announced in its ready line (`… listening on URL`)."""
        return self.ready_line.rsplit(" ", 1)[-1].strip()


@contextlib.asynccontextmanager
async def running_child(
    argv: Sequence[str],
    *,
    ready: str,
    what: str,
    start_timeout: float = 60.0,
    stop_timeout: float = 30.0,
    cwd: Path | None = None,
    hold_stdin: bool = False,
) -> AsyncIterator[Child]:
    """Run `argv` until the block ends; enter once a line containing `ready` was printed.

    With `hold_stdin` the child's stdin is a pipe this process keeps open, so a child
    that watches for EOF there ends with its parent even when the parent is killed.
    """
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if hold_stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
    )
    child = Child(process)
    announced = asyncio.Event()

    async def pump() -> None:
        assert process.stdout is not None
        async for raw in process.stdout:
            child.output.append(raw.decode(errors="replace"))
            if ready in child.output[-1]:
                announced.set()

    pumping = asyncio.create_task(pump())
    try:
        waiting = asyncio.create_task(announced.wait())
        done, _ = await asyncio.wait(
            [waiting, pumping], timeout=start_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if not announced.is_set():
            waiting.cancel()
            why = "exited" if pumping in done else f"was not ready after {start_timeout:.0f} s"
            raise ChildFailed(f"{what} {why}:\n" + "".join(child.output))
        yield child
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(stop_timeout):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
        await tasks.stop(pumping)


@contextlib.asynccontextmanager
async def running_runner(
    spec: Path, *options: str, what: str = "the runner"
) -> AsyncIterator[Child]:
    """A runner process (`python -m plnt.runner`) of `spec` on a free port, with `options`
    (its backend, cache …), until the block ends; its base URL is `Child.url`."""
    argv = [sys.executable, "-m", "plnt.runner", "--spec", str(spec), *options, "--port", "0"]
    async with running_child(argv, ready="listening on", what=what) as child:
        yield child


@contextlib.asynccontextmanager
async def running_bare_proxy(
    upstream: str, *, tls: pki.Pki | None = None
) -> AsyncIterator[tuple[str, int]]:
    """`plnt.bench.bareproxy` in front of `upstream` as a child process; its base URL and pid.

    With `tls` it serves HTTPS with that PKI's serving certificate (the API server's own).
    """
    argv = [sys.executable, "-m", "plnt.bench.bareproxy", "--upstream", upstream]
    if tls is not None:
        argv += ["--tls-cert", str(tls.serving_cert), "--tls-key", str(tls.serving_key)]
    async with running_child(
        argv, ready="listening on ", what="the bare proxy", start_timeout=30, cwd=REPO
    ) as child:
        yield child.url, child.process.pid
