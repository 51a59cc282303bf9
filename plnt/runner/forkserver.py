"""`python -m plnt.runner.forkserver --fd N`: runners forked from a process that has imported them.

Why: a runner started with `python -m plnt.runner` spends most of its start-up importing
(aiohttp, pydantic, the runner's own modules: about half a second on a small machine),
which a local deploy otherwise waits for on every new revision. This process imports all
of it once, then forks a runner per request, so a replica starts in milliseconds.

Protocol, over the connected Unix socket `N` the parent passed (a socketpair, so no path,
no permissions to get right, and nobody but the parent can ask): one JSON object per line
each way. The parent sends ``{"argv": [...], "log": PATH, "env": {...}}`` where `argv` is
exactly what it would have executed (``PYTHON -X plnt-replica=TOKEN -m plnt.runner
ARGS...``) and `env` the environment it would have executed it with; the server
answers ``{"pid": PID}`` or ``{"error": MESSAGE}``. A closed socket (the parent exited or
let go) ends the server, so it never outlives its owner.

The forked runner is what the executed one would have been:

* its own session (``setsid``), standard input from ``/dev/null``, standard output and
  error to `log` (truncated), unbuffered, default signal dispositions;
* `env` as its environment, in place of this server's (which the parent built without
  the variables a runner may be told to read, such as its backend's `apiKeyEnv`);
* its command line (``/proc/PID/cmdline``, through `setproctitle`) reads as `argv`, so the
  replica's token identifies it exactly as for an executed runner (`local_processes`);
* it runs `plnt.runner.__main__.main(ARGS)` and exits with its status, never returning
  into this server's loop.

The server is single-threaded and runs no event loop, so forking it is safe. It ignores
SIGCHLD, so the kernel reaps the runners that exit while it lives; a runner outliving
the server is re-parented as any session leader is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

import setproctitle

from plnt.runner import __main__ as runner_main

_MODULE = ["-m", "plnt.runner"]


class RequestError(ValueError):
    """A request this server cannot act on (not a runner command line, bad fields)."""


def runner_arguments(argv: list[str]) -> list[str]:
    """The runner's own arguments from an executed runner's `argv`.

    `argv` must be ``PYTHON [-X OPTION]... -m plnt.runner ARGS...``: anything else is not
    a runner and is refused, so this server can never be asked to run other code.
    """
    index = 1
    while index < len(argv) and argv[index] == "-X" and index + 1 < len(argv):
        index += 2
    if argv[index : index + 2] != _MODULE:
        raise RequestError(f"not a runner command line: {argv!r}")
    return argv[index + 2 :]


def _parse(line: bytes) -> tuple[list[str], str, dict[str, str]]:
    try:
        request: Any = json.loads(line)
    except ValueError as error:
        raise RequestError(f"not JSON: {error}") from None
    if not isinstance(request, dict):
        raise RequestError("a request is a JSON object")
    argv, log = request.get("argv"), request.get("log")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not argv:
        raise RequestError("argv must be a non-empty list of strings")
    if not isinstance(log, str) or not log:
        raise RequestError("log must be a path")
    env = request.get("env")
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise RequestError("env must map names to strings")
    return argv, log, env


def _become_runner(
    argv: list[str], arguments: list[str], log: str, env: dict[str, str], named: int
) -> None:
    """In the forked child: take the runner's name, detach, redirect, run it, exit.

    The name comes first and `named` (a pipe's write end) is closed right after it, so
    the server answers with the pid only once the process is recognisable as the replica.
    """
    status = 1
    try:
        setproctitle.setproctitle(" ".join(argv))
        os.close(named)
        os.setsid()
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as Python starts
        null = os.open(os.devnull, os.O_RDONLY)
        output = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        # Nothing of the server's (its control socket, held open by its reader) stays open
        # in a runner.
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.environ.clear()
        os.environ.update(env)
        os.environ["PYTHONUNBUFFERED"] = "1"
        sys.stdout.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(line_buffering=True, write_through=True)  # type: ignore[union-attr]
        sys.argv = [argv[0], *arguments]
        status = runner_main.main(arguments)
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def _serve_one(line: bytes) -> dict[str, Any]:
    try:
        argv, log, env = _parse(line)
        arguments = runner_arguments(argv)
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
    except (RequestError, OSError) as error:
        return {"error": str(error)}
    waiting, named = os.pipe()
    try:
        pid = os.fork()
    except OSError as error:
        os.close(waiting)
        os.close(named)
        return {"error": f"fork failed: {error}"}
    if pid == 0:
        os.close(waiting)
        _become_runner(argv, arguments, log, env, named)
    os.close(named)
    try:
        os.read(waiting, 1)  # end of file once the child has taken its name (or died)
    finally:
        os.close(waiting)
    return {"pid": pid}


def serve(control: socket.socket) -> None:
    """Answer requests on `control` until the other end closes it."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    reader = control.makefile("rb")
    control.sendall(b'{"ready": true}\n')
    for line in reader:
        answer = _serve_one(line)
        control.sendall(json.dumps(answer).encode() + b"\n")


def main(argv: list[str] | None = None) -> int:
    """Serve on the inherited socket `--fd`; 0 when the parent closes it."""
    parser = argparse.ArgumentParser(prog="python -m plnt.runner.forkserver", description=__doc__)
    parser.add_argument("--fd", type=int, required=True, help="the connected control socket")
    args = parser.parse_args(argv)
    # SIGINT goes to the whole foreground group on Ctrl-C; the owner decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with (
        socket.socket(fileno=args.fd) as control,
        contextlib.suppress(BrokenPipeError, ConnectionResetError),
    ):
        serve(control)
    return 0


if __name__ == "__main__":
    sys.exit(main())
