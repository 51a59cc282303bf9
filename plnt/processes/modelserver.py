"""Run a local model server as a child process: llama.cpp's OpenAI API over pinned weights.

Why a child process, like etcd and Temporal: `plnt up --model NAME` must need nothing but
the Python environment (the `llm` extra brings llama-cpp-python and the weights), must
leave nothing running when it stops, and must bring the model back when it crashes
(`plnt.processes.supervision` drives `exit_code()` and `arestart()`).

The server is llama-cpp-python's (its `[server]` extra, FastAPI and uvicorn), run as
`python -m plnt.processes.llamaserving` with `python -m llama_cpp.server`'s arguments:
`/v1/models`, `/v1/completions` and `/v1/chat/completions` with SSE, `usage` on answers
that are not streamed (none in a stream, even when asked), and
`POST /extras/tokenize/count`; plnt's entry point adds `GET /metrics` (the requests
running and waiting, for backend probes) and answers `/v1/models` without waiting for the
model (see `plnt.processes.llamaserving`).

Lifecycle:

* `astart()` first verifies the weights against plnt's pin (`weights.averify`, off the
  loop): a mismatch raises `WeightsMismatch` and nothing is spawned. Then it picks a free
  loopback port (unless given), spawns the server with its output in `log_file`, and
  waits, with a deadline, until `GET /v1/models` answers 200 (the model is loaded then).
  A child that exits early is reported with the tail of its log; when the port was
  picked here, a lost port race is retried with another.
* `arestart()` stops a child that still runs and starts it again on the same port and
  weights (verified again: no server ever starts on bytes other than the pin), so a
  PlntBackend naming the endpoint stays right.
* `stop()` sends SIGTERM, waits `stop_timeout`, SIGKILLs, and always reaps; idempotent.
  The child has a process group of its own, so a Ctrl-C in the terminal reaches only the
  parent, which stops it in order. A parent killed with SIGKILL stops nothing: the kernel
  sends the child SIGTERM then (`plnt.processes.tethering`, spawned from the event loop's
  thread), and a record beside the log (`pid_file`, `plnt.processes.leftovers`) lets the
  next start find one that outlived its parent all the same.
* Its environment is built for it (`plnt.processes.environments`), never inherited:
  llama-cpp-python reads every one of its settings from environment variables (`PORT`,
  `HOST`, `MODEL`, `N_CTX`, `API_KEY`, … pydantic settings, which fill any field the
  command line leaves out), so a `PORT` exported for something else would move the server.

Settings that matter for plnt (each a keyword argument): `--interrupt_requests False`,
because llama-cpp-python otherwise ends a stream early as soon as any other request
arrives (a second caller, a backend probe); a fixed `--seed` (0), so sampling is
reproducible when callers ask for temperature 0; `--n_ctx` 2048; half the machine's
cores as threads (`DEFAULT_THREADS`); `--use_mlock False`, since locking 250 MB fails without
CAP_IPC_LOCK in containers and buys nothing here. The server handles one request at a
time (a lock around the model, which also serialises `/v1/models`).

Errors (from `plnt.processes.models`): `WeightsMismatch`, `WeightsUnavailable`,
`ExtraMissing`, `ModelServerError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from plnt.processes import (
    environments,
    leftovers,
    logtails,
    models,
    ports,
    readiness,
    tethering,
    weights,
)

PROGRAM = "plnt.processes.llamaserving"
"""The child's module: llama-cpp-python's server with its load at `/metrics` (see there)."""

DEFAULT_THREADS = max(1, min((os.cpu_count() or 2) // 2, 4))
"""Half the machine's cores (at most 4): llama.cpp's threads wait for each other at every
layer, so when they outnumber the cores left free by the API server, the runners and the
rest, generation collapses (measured on 2 busy cores: 16 tokens in 1 to 2 s with one thread,
5 to 27 s with two). With the machine to itself, one thread gives ~25 tokens/s, two ~38."""


@dataclass(frozen=True, slots=True)
class StartTimes:
    """Where the last start spent its time, in seconds (for the cold-start benchmark)."""

    verify: float
    """Hashing the weights and comparing with the pin."""
    load: float
    """From spawning the server to its first 200 on `/v1/models`."""
    assemble: float = 0.0
    """Assembling the weights file from its package, when the caller did it and said so
    (`plnt up --model` does; `ModelServer` itself is handed an assembled file)."""

    def describe(self) -> str:
        """`weights assembled 0.01 s, verified 0.31 s, server loaded 2.05 s`."""
        return (
            f"weights assembled {self.assemble:.2f} s, verified {self.verify:.2f} s, "
            f"server loaded {self.load:.2f} s"
        )


class ModelServer:
    """One `python -m llama_cpp.server` on loopback serving `pin`'s verified weights.

    `endpoint` (``http://127.0.0.1:PORT/v1``, an OpenAI base URL) is valid after start.
    """

    def __init__(
        self,
        pin: models.ModelPin,
        weights_path: Path,
        *,
        log_file: Path,
        port: int = 0,
        context_tokens: int = 2048,
        seed: int = 0,
        threads: int = DEFAULT_THREADS,
        start_timeout: float = 120.0,
        stop_timeout: float = 10.0,
        python: str = sys.executable,
    ) -> None:
        self.pin = pin
        self.weights_path = weights_path
        self.log_file = log_file
        self._want_port = port
        self.port = port
        self.context_tokens = context_tokens
        self.seed = seed
        self.threads = threads
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.python = python
        self.started: StartTimes | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def root(self) -> str:
        """The server's root URL (`/extras/tokenize` lives there)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        """The OpenAI base URL, what a PlntBackend's `endpoint` names."""
        return f"{self.root}/v1"

    @property
    def model(self) -> str:
        """The model name the server answers to (`model` in requests, `/v1/models`)."""
        return self.pin.name

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

    def command(self) -> list[str]:
        """The server's command line for the current port."""
        return [
            self.python, "-m", PROGRAM,
            "--model", str(self.weights_path),
            "--model_alias", self.pin.name,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.context_tokens),
            "--seed", str(self.seed),
            "--n_threads", str(self.threads),
            "--n_threads_batch", str(self.threads),
            "--use_mlock", "False",
            "--interrupt_requests", "False",
            "--verbose", "False",
        ]  # fmt: skip

    async def astart(self) -> None:
        """Verify the weights, spawn the server and wait until it serves the model."""
        await self._astart(keep_port=False)

    async def arestart(self) -> None:
        """Start the server again on its port with the same (re-verified) weights."""
        await self.astop()
        await self._astart(keep_port=True)

    async def _astart(self, *, keep_port: bool) -> None:
        weights.require_extra(self.pin)
        began = time.perf_counter()
        await weights.averify(self.weights_path, self.pin)
        verified = time.perf_counter()
        attempts = 1 if keep_port or self._want_port else ports.PORT_ATTEMPTS

        async def attempt(retryable: bool) -> None:
            if not keep_port:
                self.port = self._want_port or ports.free_port()
            spawned = time.perf_counter()
            self._spawn()
            await self._wait_ready(retryable=retryable)
            self.started = StartTimes(verify=verified - began, load=time.perf_counter() - spawned)

        await ports.start_until_bound(attempts, attempt, self.astop)

    def _spawn(self) -> None:
        """Popen rather than an asyncio subprocess: the child must not belong to one event
        loop, so that sync callers (test fixtures) can stop it from any loop."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(
                tethering.tethered(self.command()),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
                close_fds=True,
                env=environments.child(python=True),
            )
        leftovers.record(self.pid_file, self._process.pid, what=f"model server {self.model}")

    async def _wait_ready(self, *, retryable: bool) -> None:
        assert self._process is not None

        def exited(code: int) -> BaseException:
            tail = self._tail()
            error = models.ModelServerError(f"the model server exited with code {code}: {tail}")
            return ports.race_or(error, tail, retryable=retryable)

        def late() -> BaseException:
            return models.ModelServerError(
                f"the model server was not ready after {self.start_timeout:.0f} s: {self._tail()}"
            )

        await readiness.wait_until_answering(
            f"{self.endpoint}/models",
            self._process,
            within_seconds=self.start_timeout,
            exited=exited,
            late=late,
        )

    def _tail(self) -> str:
        return logtails.last_lines(self.log_file)

    async def astop(self) -> int | None:
        """Like `stop`; the waiting happens in a thread and is finished even if cancelled."""
        return await asyncio.shield(asyncio.to_thread(self.stop))

    def stop(self) -> int | None:
        """SIGTERM, wait up to `stop_timeout`, SIGKILL; always reaped; idempotent.
        Returns the exit code (None when nothing was running)."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
        code = process.wait()
        leftovers.forget(self.pid_file, process.pid)
        return code
