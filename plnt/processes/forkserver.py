"""The pre-warmed runner: a `plnt.runner.forkserver` child that has already imported the runner.

Why: executing `python -m plnt.runner` costs a replica Python's start-up and the runner's
imports (about half a second here) before it can answer `/readyz`, and a local deploy
waits for it. The fork server pays that once, when the worker starts, and forks each
replica from there (see its module doc for the protocol and what the forked runner is).
Here, below the sagas, because the local target and the saga benchmark both use it;
it only names the server's module, never imports the runner.

Environments (`plnt.processes.environments`): the server starts with a Python child's
(nothing of the worker's environment but the allow-list), and each request carries the
environment its runner gets (`environments.runner`: the allow-list and the variable its
backend config names as `apiKeyEnv`), which the forked runner takes as its own, so a forked
runner sees exactly what an executed one would.

It dies with its owner without a parent-death signal: its control socket closes when the
owner exits, however it exits, and the server ends then. (A parent-death signal would be
wrong here: the server is started from a pool thread, and the kernel sends the signal when
that *thread* exits.) Runners it forked are never tied to it. With a `log_path`, a record
beside the log (`plnt.processes.leftovers`) names the running server for a later start.

Blocking (the local target calls it from a thread); requests are
serialised by a lock because several installs may spawn at once. Anything wrong with the
server (it died, it refused, it cannot be started) makes `spawn` raise `Unavailable`, and
the target falls back to executing the runner: a deploy never depends on the
optimisation.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plnt.processes import environments, leftovers

_START_TIMEOUT = 60.0
"""Seconds the server may take to import the runner and say it is ready."""
_ANSWER_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


class Unavailable(RuntimeError):
    """The fork server cannot start this replica; execute the runner instead."""


class ForkServer:
    """One `plnt.runner.forkserver` child, started on first use (or by `start`)."""

    def __init__(self, python: str, *, log_path: Path | None = None) -> None:
        self.python = python
        self.log_path = log_path
        """Where the server's own output goes (its runners log to their own files)."""
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._reader: Any = None
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs."""
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start the server if it is not running, and wait until it has imported the runner."""
        with self._lock:
            self._ensure_started()

    def spawn(self, argv: Sequence[str], *, log_path: Path) -> int:
        """Fork a runner as `argv` would have run, output to `log_path`; its pid.

        Raises `Unavailable` when the server is closed, cannot be (re)started, refuses the
        request or dies while answering; a server found dead is restarted once.
        """
        environment = environments.runner(argv)
        request = {"argv": list(argv), "log": str(log_path), "env": environment}
        line = json.dumps(request).encode() + b"\n"
        with self._lock:
            for attempt in (1, 2):
                self._ensure_started()
                try:
                    answer = self._ask(line)
                except (OSError, ValueError) as error:
                    self._discard()
                    if attempt == 2:
                        raise Unavailable(f"fork server failed: {error}") from error
                    continue
                if "pid" in answer and isinstance(answer["pid"], int):
                    return answer["pid"]
                raise Unavailable(f"fork server refused: {answer.get('error', answer)!r}")
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop the server (closing its socket ends it); runners it forked keep running."""
        with self._lock:
            self._closed = True
            self._discard()

    # -- inside the lock -------------------------------------------------------------------

    def _ensure_started(self) -> None:
        if self._closed:
            raise Unavailable("fork server closed")
        if self._process is not None and self._process.poll() is None:
            return
        self._discard()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
            output = (
                open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
                if self.log_path is not None
                else subprocess.DEVNULL
            )
            try:
                self._process = subprocess.Popen(
                    [
                        self.python,
                        "-m",
                        "plnt.runner.forkserver",
                        "--fd",
                        str(theirs.fileno()),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    pass_fds=(theirs.fileno(),),
                    close_fds=True,
                    env=environments.child(python=True),
                )
            finally:
                if not isinstance(output, int):
                    output.close()
        except OSError as error:
            ours.close()
            raise Unavailable(f"cannot start the fork server: {error}") from error
        finally:
            theirs.close()
        if self.log_path is not None:
            leftovers.record(
                leftovers.record_path(self.log_path), self._process.pid, what="fork server"
            )
        self._control = ours
        self._reader = ours.makefile("rb")
        ours.settimeout(_START_TIMEOUT)
        try:
            ready = self._read_answer()
        except (OSError, ValueError) as error:
            self._discard()
            raise Unavailable(f"the fork server did not start: {error}") from error
        if ready.get("ready") is not True:
            self._discard()
            raise Unavailable(f"the fork server did not start: {ready!r}")
        ours.settimeout(_ANSWER_TIMEOUT)

    def _ask(self, request: bytes) -> dict[str, Any]:
        assert self._control is not None
        self._control.sendall(request)
        return self._read_answer()

    def _read_answer(self) -> dict[str, Any]:
        line = self._reader.readline()
        if not line:
            raise ValueError("the fork server closed its socket")
        answer = json.loads(line)
        if not isinstance(answer, dict):
            raise ValueError(f"unexpected answer {answer!r}")
        return answer

    def _discard(self) -> None:
        """Close the socket (which ends the server) and collect the process."""
        if self._reader is not None:
            with contextlib.suppress(OSError):
                self._reader.close()
            self._reader = None
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
            self._control = None
        process, self._process = self._process, None
        if process is None:
            return
        try:
            process.wait(timeout=_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if self.log_path is not None:
            leftovers.forget(leftovers.record_path(self.log_path), process.pid)


def enabled_by_default() -> bool:
    """Whether the worker pre-warms runners: yes, unless `PLNT_RUNNER_FORKSERVER=0`.

    The switch exists to measure the executed start against the forked one, and as a way
    out should forking ever misbehave on a platform.
    """
    return os.environ.get("PLNT_RUNNER_FORKSERVER", "1") != "0"
