"""The local target: each replica of a revision is a runner process on a loopback port.

The standalone mode's `Target`. Replicas are `python -m plnt.runner` processes in their
own session (forked by the pre-warmed server when `prewarm` is on, else executed), so they
outlive the worker and the API server that asked for them;
everything needed to find them again is on disk (see `local_records`). Any worker, the
one that started them or a later one, adopts them. A revision is `runners.Revision`, the
model the Kubernetes target renders as chart values; its cluster-only fields (GPU class,
image, resources) mean nothing here and are ignored.

Rules that make every operation safe to retry and to run twice at once:

* A change to a run (install, scale, retire, teardown) holds an exclusive `fcntl.flock`
  on the run directory's `.lock`, so an old worker still running an activity and the one
  Temporal retried it on never both start a replica.
* A replica is adopted when its record's process is alive, not a zombie, carries the
  record's token on its command line (see `local_processes`) and was started with the
  same settings; otherwise it is (re)started. There is never a second process for one
  (revision, index).
* A replica's port is picked free just before the start; a runner that exits because the
  port was taken in between is restarted on another port.
* Install waits, with a deadline, until every replica answers `GET /readyz` with 200,
  calling `heartbeat` on each poll. Replicas not ready by then are stopped and
  `InstallFailed` carries the tail of their logs.
* A backend's credentials are a Secret key; standalone, Secret `NAME` key `KEY` is the file
  `secrets_dir/NAME/KEY` (the layout of a mounted Secret volume). The runner is pointed at
  the file (`apiKeyFile`) and reads it itself, so the key is never copied into a config,
  a command line or the saga's history. A missing file is `CredentialsMissing`, before
  anything starts.

Errors: `interface.TargetError` (base), `interface.InstallFailed`,
`interface.CredentialsMissing`, `local_records.InvalidRunKey` (a run key that cannot name
a directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import secrets
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from plnt.processes import forkserver, ports
from plnt.sagas.targets import interface, local_scrape
from plnt.sagas.targets import local_processes as processes
from plnt.sagas.targets import local_records as records

Heartbeat = Callable[[Any], None] | None
_T = TypeVar("_T")
_HOST = "127.0.0.1"


@dataclass(frozen=True)
class _Launch:
    """What every replica of one revision is started with."""

    spec: Path
    backend_config: Path
    cache: interface.CacheConfig
    fingerprint: str


async def _in_thread_to_the_end(function: Callable[..., _T], /, *args: Any) -> _T:
    """Run blocking `function` in a thread; on cancellation, wait for it before re-raising.

    The thread cannot be stopped, so letting the caller go (and release the run lock)
    while it still starts or stops processes would let another worker race it.
    """
    task = asyncio.ensure_future(asyncio.to_thread(function, *args))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise


def _beat(heartbeat: Heartbeat, **details: Any) -> None:
    if heartbeat is not None:
        heartbeat(details)


class LocalTarget:
    """Replicas as runner processes on this machine, with state under `state_dir`."""

    def __init__(
        self,
        state_dir: Path,
        *,
        ready_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        python: str = sys.executable,
        port_picker: Callable[[], int] = ports.free_port,
        port_attempts: int = 5,
        poll_interval: float = 0.05,
        probe_timeout: float = 1.0,
        secrets_dir: Path | None = None,
        scrape_dir: Path | None = None,
        prewarm: bool = False,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.forkserver = (
            forkserver.ForkServer(python, log_path=self.state_dir / "forkserver.log")
            if prewarm
            else None
        )
        """Forks replicas from a process that has imported the runner (`prewarm`); None:
        every replica executes `python -m plnt.runner`."""
        self._warming: asyncio.Future[None] | None = None
        self.secrets_dir = None if secrets_dir is None else Path(secrets_dir)
        self.scrape_dir = None if scrape_dir is None else Path(scrape_dir)
        """Where each run's Prometheus file SD file is kept (`local_scrape`); None: none."""
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.python = python
        self.port_picker = port_picker
        self.port_attempts = port_attempts
        self.poll_interval = poll_interval
        self.probe_timeout = probe_timeout

    # --- the Target protocol -------------------------------------------------------------

    async def install(
        self, revision: interface.Revision, *, heartbeat: Heartbeat = None
    ) -> list[interface.Replica]:
        """Ensure replicas 0..N-1 of `revision` run and are ready; adopt live ones.

        Replicas with a higher index (left by an earlier scale-up) are left alone;
        `scale` removes them.
        """
        layout = records.RunLayout(self.state_dir, revision.run)
        async with self._locked(layout, heartbeat, create=True), self._published(layout):
            launch, started = await _in_thread_to_the_end(self._ensure, layout, revision)
            ready = await self._await_ready(layout, revision, launch, started, heartbeat)
        return [self._replica(record, ready=True) for record in ready]

    async def scale(
        self, revision: interface.Revision, *, heartbeat: Heartbeat = None
    ) -> list[interface.Replica]:
        """Stop replicas beyond `revision.replicas` (highest index first), then install."""
        layout = records.RunLayout(self.state_dir, revision.run)
        async with self._locked(layout, heartbeat, create=True), self._published(layout):
            extras = [
                record
                for record in layout.records(revision.revision)
                if record.index >= revision.replicas
            ]
            for record in sorted(extras, key=lambda record: record.index, reverse=True):
                _beat(heartbeat, revision=revision.revision, stopping=record.index)
                await self._stop_records(layout, [record])
            launch, started = await _in_thread_to_the_end(self._ensure, layout, revision)
            ready = await self._await_ready(layout, revision, launch, started, heartbeat)
        return [self._replica(record, ready=True) for record in ready]

    async def replicas(self, run: interface.RunRef, revision: int) -> list[interface.Replica]:
        """The revision's live replicas, each with a quick `GET /readyz` for readiness."""
        layout = records.RunLayout(self.state_dir, run)
        live = await asyncio.to_thread(self._live_records, layout, revision)
        timeout = aiohttp.ClientTimeout(total=self.probe_timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            readiness = await asyncio.gather(*(self._probe(session, record.url) for record in live))
        return [
            self._replica(record, ready=ready)
            for record, ready in zip(live, readiness, strict=True)
        ]

    async def revisions(self, run: interface.RunRef) -> list[int]:
        """Revisions of `run` with at least one live replica, ascending."""
        layout = records.RunLayout(self.state_dir, run)
        live = await asyncio.to_thread(self._live_records, layout, None)
        return sorted({record.revision for record in live})

    async def retire(self, run: interface.RunRef, revision: int) -> None:
        """Stop every replica of `revision` and remove its records (no-op when none)."""
        layout = records.RunLayout(self.state_dir, run)
        if not layout.root.is_dir():
            return
        async with self._locked(layout, None, create=False) as locked:
            if locked:
                async with self._published(layout):
                    await self._stop_records(layout, layout.records(revision))

    async def teardown(self, run: interface.RunRef) -> None:
        """Stop every replica of every revision of `run` and remove the run's directory."""
        layout = records.RunLayout(self.state_dir, run)
        if not layout.root.is_dir():
            return
        async with self._locked(layout, None, create=False) as locked:
            if locked:
                await self._stop_records(layout, layout.records())
                if self.scrape_dir is not None:
                    local_scrape.forget(self.scrape_dir, run)
                await _in_thread_to_the_end(shutil.rmtree, layout.root, True)

    async def start(self) -> None:
        """Start the pre-warmed runner server in the background, so the first deploy does
        not wait for its imports and the worker does not wait for them either.

        A server that cannot start is not an error: replicas are then executed.
        """
        if self.forkserver is not None and self._warming is None:
            self._warming = asyncio.ensure_future(asyncio.to_thread(self._warm))

    def _warm(self) -> None:
        assert self.forkserver is not None
        with contextlib.suppress(forkserver.Unavailable):
            self.forkserver.start()

    async def close(self) -> None:
        """Stop the pre-warmed runner server; the replicas it forked keep running."""
        if self.forkserver is None:
            return
        if self._warming is not None:
            await asyncio.wait([self._warming])
        await asyncio.to_thread(self.forkserver.close)

    # --- locking -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _locked(
        self, layout: records.RunLayout, heartbeat: Heartbeat, *, create: bool
    ) -> AsyncIterator[bool]:
        """Hold the run's flock; yields False when the run is gone and `create` is False.

        The lock is polled (non-blocking) so waiting can be cancelled and heartbeats.
        A lock file removed by a teardown while we waited is not a lock: reopen it.
        """
        while True:
            if create:
                layout.root.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:
                yield False
                return
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        _beat(heartbeat, waiting="run lock")
                        await asyncio.sleep(self.poll_interval)
                try:
                    current = os.stat(layout.lock).st_ino
                except FileNotFoundError:
                    current = None
                if current == os.fstat(fd).st_ino:
                    yield True
                    return
            finally:
                os.close(fd)  # also releases the lock

    @contextlib.asynccontextmanager
    async def _published(self, layout: records.RunLayout) -> AsyncIterator[None]:
        """After the block (even a failed one), the run's SD file matches its records."""
        try:
            yield
        finally:
            if self.scrape_dir is not None:
                await _in_thread_to_the_end(local_scrape.publish, self.scrape_dir, layout)

    # --- starting and adopting (blocking; run in a thread, under the lock) --------------------

    def _launch(self, layout: records.RunLayout, revision: interface.Revision) -> _Launch:
        layout.write_identity()
        spec = layout.write_content("specs", ".yaml", revision.spec)
        api_key_file = self._api_key_file(revision.backend)
        fallback = revision.backend.fallback
        fallback_key_file = None if fallback is None else self._api_key_file(fallback)
        document = records.backend_document(
            revision.backend, api_key_file, fallback_api_key_file=fallback_key_file
        )
        backend = layout.write_content("backends", ".json", document)
        identity = [spec.name, backend.name, *processes.cache_arguments(revision.cache)]
        fingerprint = hashlib.sha256("\0".join(identity).encode()).hexdigest()
        return _Launch(spec, backend, revision.cache, fingerprint)

    def _api_key_file(self, backend: interface.BackendConfig) -> Path | None:
        """The file holding the backend's key, or None when it needs none."""
        ref = backend.credentials
        if ref is None:
            return None
        named = f'PlntBackend "{backend.name}" credentialsRef {ref.name}/{ref.key}'
        if self.secrets_dir is None:
            raise interface.CredentialsMissing(f"{named}: this worker has no secrets directory")
        try:
            path = records.secret_path(self.secrets_dir, ref.name, ref.key)
        except interface.CredentialsMissing as error:
            raise interface.CredentialsMissing(f"{named}: {error}") from error
        if not path.is_file():
            raise interface.CredentialsMissing(
                f"{named}: no secret file {path}; write the key there (mode 0600)"
            )
        return path

    def _ensure(
        self, layout: records.RunLayout, revision: interface.Revision
    ) -> tuple[_Launch, list[records.ReplicaRecord]]:
        """Adopt or start replicas 0..N-1; return the launch settings and their records."""
        launch = self._launch(layout, revision)
        result = []
        for index in range(revision.replicas):
            record = layout.read_record(revision.revision, index)
            if record is not None:
                pid = processes.resolve(record.pid, record.token)
                if pid is not None and record.fingerprint == launch.fingerprint:
                    if pid != record.pid:
                        record = replace(record, pid=pid)
                        layout.write_record(record)
                    result.append(record)
                    continue
                processes.stop([(pid, record.token)], timeout=self.stop_timeout)
            result.append(self._start(layout, revision.revision, index, launch))
        return launch, result

    def _start(
        self, layout: records.RunLayout, revision: int, index: int, launch: _Launch
    ) -> records.ReplicaRecord:
        """Start one replica on a fresh port; the record is written before the spawn."""
        port = self.port_picker()
        token = secrets.token_hex(12)
        log = layout.log_path(revision, index)
        record = records.ReplicaRecord(
            revision=revision,
            index=index,
            token=token,
            port=port,
            url=f"http://{_HOST}:{port}",
            spec=str(launch.spec),
            backend_config=str(launch.backend_config),
            fingerprint=launch.fingerprint,
            log=str(log),
            started_at=time.time(),
        )
        layout.write_record(record)
        argv = processes.runner_command(
            self.python,
            token=token,
            spec=launch.spec,
            backend_config=launch.backend_config,
            host=_HOST,
            port=port,
            cache=launch.cache,
        )
        try:
            pid = self._spawn(argv, log)
        except OSError as error:
            layout.remove_record(record)
            raise interface.InstallFailed(
                f"cannot start replica {index} of revision {revision}: {error}"
            ) from error
        record = replace(record, pid=pid)
        layout.write_record(record)
        return record

    def _spawn(self, argv: list[str], log: Path) -> int:
        """Fork the replica from the pre-warmed server; execute it when that cannot."""
        if self.forkserver is not None:
            with contextlib.suppress(forkserver.Unavailable):
                return self.forkserver.spawn(argv, log_path=log)
        return processes.spawn(argv, log_path=log)

    def _live_records(
        self, layout: records.RunLayout, revision: int | None
    ) -> list[records.ReplicaRecord]:
        return [
            record
            for record in layout.records(revision)
            if processes.is_ours(record.pid, record.token)
        ]

    # --- readiness ---------------------------------------------------------------------------

    async def _probe(self, session: aiohttp.ClientSession, url: str) -> bool:
        try:
            async with session.get(f"{url}/readyz") as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    async def _await_ready(
        self,
        layout: records.RunLayout,
        revision: interface.Revision,
        launch: _Launch,
        started: list[records.ReplicaRecord],
        heartbeat: Heartbeat,
    ) -> list[records.ReplicaRecord]:
        """Wait until every replica is ready; restart lost port races; fail with log tails."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        pending = {record.index: record for record in started}
        ready: dict[int, records.ReplicaRecord] = {}
        failures: dict[int, str] = {}
        current = dict(pending)
        attempts = dict.fromkeys(pending, 1)
        timeout = aiohttp.ClientTimeout(total=self.probe_timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while pending:
                _beat(
                    heartbeat,
                    revision=revision.revision,
                    ready=len(ready),
                    replicas=len(started),
                )
                for index, record in list(pending.items()):
                    alive = await asyncio.to_thread(processes.is_ours, record.pid, record.token)
                    if alive:
                        if await self._probe(session, record.url):
                            ready[index] = pending.pop(index)
                        continue
                    tail = await asyncio.to_thread(processes.log_tail, Path(record.log))
                    if ports.lost_port_race(tail) and attempts[index] < self.port_attempts:
                        attempts[index] += 1
                        pending[index] = current[index] = await _in_thread_to_the_end(
                            self._start, layout, revision.revision, index, launch
                        )
                        continue
                    failures[index] = f"exited during start-up:\n{tail}"
                    del pending[index]
                if pending and loop.time() >= deadline:
                    for index, record in pending.items():
                        tail = await asyncio.to_thread(processes.log_tail, Path(record.log))
                        failures[index] = f"not ready within {self.ready_timeout:g}s:\n{tail}"
                    break
                if pending:
                    await asyncio.sleep(self.poll_interval)
        if failures:
            await self._stop_records(layout, [current[index] for index in failures])
            raise _not_ready(revision, failures)
        return [ready[index] for index in sorted(ready)]

    # --- stopping ----------------------------------------------------------------------------

    async def _stop_records(
        self, layout: records.RunLayout, stopping: list[records.ReplicaRecord]
    ) -> int:
        def stop() -> int:
            targets = [(processes.resolve(r.pid, r.token), r.token) for r in stopping]
            count = processes.stop(targets, timeout=self.stop_timeout)
            for record in stopping:
                layout.remove_record(record)
            return count

        return await _in_thread_to_the_end(stop)

    @staticmethod
    def _replica(record: records.ReplicaRecord, *, ready: bool) -> interface.Replica:
        return interface.Replica(
            revision=record.revision,
            index=record.index,
            url=record.url,
            ready=ready,
            pid=record.pid,
        )


def stop_all(state_dir: Path, *, timeout: float = 10.0, scrape_dir: Path | None = None) -> int:
    """Stop every runner recorded under `state_dir`; return how many were running.

    Blocking, and it takes no run locks: it is for `plnt down`-style clean-up and test
    fixtures, when nothing else should be changing the runs. Records are removed (and
    every run's SD file in `scrape_dir`); run directories stay (with their logs).
    """
    files = records.all_record_files(Path(state_dir))
    found = [(path, record) for path in files if (record := records.read_record_file(path))]
    targets = [(processes.resolve(record.pid, record.token), record.token) for _, record in found]
    count = processes.stop(targets, timeout=timeout)
    for path, _ in found:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    if scrape_dir is not None:
        local_scrape.forget_all(scrape_dir)
    return count


def _not_ready(revision: interface.Revision, failures: dict[int, str]) -> interface.InstallFailed:
    """The error naming each replica that did not start, with its log's last lines."""
    details = "\n".join(
        f"replica {index}: {message}" for index, message in sorted(failures.items())
    )
    run = revision.run
    return interface.InstallFailed(
        f"revision {revision.revision} of {run.namespace}/{run.name} is not ready:\n{details}"
    )
