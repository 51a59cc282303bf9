"""Runner processes on this machine: start one, tell whether a pid is it, stop it, reap it.

Blocking, Linux-only helpers (they read `/proc`); the async target calls them through
`asyncio.to_thread`.

`spawn` executes a runner (the target forks them from `plnt.processes.forkserver` when
it can, and falls back to this). Why `os.posix_spawn` and not `subprocess.Popen` or
asyncio subprocesses: a replica must outlive the worker, so nobody keeps a process
object for it. A dropped `Popen` warns (`ResourceWarning`) and asyncio's child watcher
parks a thread per child; a bare pid does neither. Because the spawning process may
still be the parent, every liveness check and every stop first reaps the pid with
``waitpid(pid, WNOHANG)`` (ECHILD — not our child — is fine), so exited replicas never
linger as zombies.

The runner's environment is built for it (`plnt.processes.environments.runner`: the
allow-list and the variable its backend config names as `apiKeyEnv`), never the worker's
whole environment. No parent-death signal: a runner outlives the worker and `plnt up` on
purpose, and the next start adopts it.

Identity: a process is "ours" only if it is alive, not a zombie, and its command line
holds the replica's unique ``-X plnt-replica=TOKEN`` argument. A pid that the kernel has
reused for another process fails that check and is never adopted or signalled.
CPython stores unknown ``-X`` options in `sys._xoptions` and otherwise ignores them, so
the token costs the runner nothing. A runner forked by the pre-warmed server
(`plnt.processes.forkserver`) shows the same words as its title (`carries_token`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from plnt.processes import environments
from plnt.sagas.targets import interface

TOKEN_OPTION = "plnt-replica"
_POLL_SECONDS = 0.02
_KILL_GRACE_SECONDS = 5.0
_EMPTY_COMMAND_LINE_SECONDS = 1.0


def token_argument(token: str) -> str:
    """The ``-X`` value that marks a runner process as one replica's."""
    return f"{TOKEN_OPTION}={token}"


def cache_arguments(cache: interface.CacheConfig) -> list[str]:
    """The runner's step cache options; a disabled cache keeps no entries."""
    max_entries = cache.max_entries if cache.enabled else 0
    return [
        "--cache-max-entries",
        str(max_entries),
        "--cache-ttl-seconds",
        repr(float(cache.ttl_seconds)),
    ]


def runner_command(
    python: str,
    *,
    token: str,
    spec: Path,
    backend_config: Path,
    host: str,
    port: int,
    cache: interface.CacheConfig,
) -> list[str]:
    """The argv of one replica: `python -X plnt-replica=TOKEN -m plnt.runner ...`."""
    return [
        python,
        "-X",
        token_argument(token),
        "-m",
        "plnt.runner",
        "--spec",
        str(spec),
        "--backend-config",
        str(backend_config),
        "--host",
        host,
        "--port",
        str(port),
        *cache_arguments(cache),
    ]


def spawn(argv: Sequence[str], *, log_path: Path) -> int:
    """Start `argv` in a new session, output to `log_path` (truncated); return its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    file_actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    environment = environments.runner(argv)
    return os.posix_spawn(
        argv[0],
        list(argv),
        environment,
        file_actions=file_actions,
        setsid=True,
        setsigmask=(),
    )


def reap(pid: int) -> None:
    """Collect `pid`'s exit status if it is our exited child; nothing otherwise."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _state(pid: int) -> str | None:
    """The process state letter from /proc (R, S, Z …), or None when there is no process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[0] if fields else None


def _command_line(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def carries_token(arguments: list[str], token: str) -> bool:
    """True when a command line holds the replica's token argument.

    An executed runner has it as an argument of its own; a runner forked by the pre-warmed
    server (`plnt.processes.forkserver`) shows its command line as one title string of
    space-separated words, the token among them.
    """
    marker = token_argument(token)
    return marker in arguments or any(marker in argument.split(" ") for argument in arguments)


def is_ours(pid: int | None, token: str) -> bool:
    """True when `pid` is a live (non-zombie) process carrying the replica's token.

    The kernel shows an empty command line for a moment around `execve` (the spawner is
    resumed before the new program's arguments are mapped) and while a process exits,
    so an empty one is read again until it fills in or the process is gone.
    """
    if pid is None or pid <= 0:
        return False
    deadline = time.monotonic() + _EMPTY_COMMAND_LINE_SECONDS
    while True:
        reap(pid)
        if _state(pid) in (None, "Z", "X"):
            return False
        arguments = _command_line(pid)
        if arguments or time.monotonic() >= deadline:
            return carries_token(arguments, token)
        time.sleep(_POLL_SECONDS / 4)


def find_by_token(token: str) -> int | None:
    """The pid of the live process carrying `token`, if any (scans /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if carries_token(_command_line(pid), token) and is_ours(pid, token):
            return pid
    return None


def resolve(pid: int | None, token: str) -> int | None:
    """The live pid of a replica: the recorded one if it is still ours, else a token scan."""
    if is_ours(pid, token):
        return pid
    return find_by_token(token)


def _signal(pid: int, token: str, signum: signal.Signals) -> bool:
    """Send `signum` only if `pid` is still the replica; True when it was sent."""
    if not is_ours(pid, token):
        return False
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(processes: Iterable[tuple[int, str]], deadline: float) -> list[tuple[int, str]]:
    """Poll until every process has exited or `deadline` (monotonic); return survivors."""
    remaining = list(processes)
    while remaining:
        remaining = [(pid, token) for pid, token in remaining if is_ours(pid, token)]
        if not remaining or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_SECONDS)
    return remaining


def stop(processes: Iterable[tuple[int | None, str]], *, timeout: float) -> int:
    """SIGTERM every (pid, token) that is still ours, SIGKILL what outlives `timeout`.

    Returns how many processes were signalled. Processes that are not ours (dead,
    reused pids) are left alone, so stopping is idempotent.
    """
    signalled = [
        (pid, token)
        for pid, token in processes
        if pid is not None and _signal(pid, token, signal.SIGTERM)
    ]
    survivors = _wait_gone(signalled, time.monotonic() + timeout)
    for pid, token in survivors:
        _signal(pid, token, signal.SIGKILL)
    _wait_gone(survivors, time.monotonic() + _KILL_GRACE_SECONDS)
    return len(signalled)


def log_tail(path: Path, *, lines: int = 20, max_bytes: int = 16384) -> str:
    """The last `lines` lines of a log file ('' when it does not exist)."""
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - max_bytes))
            data = log.read()
    except OSError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])
