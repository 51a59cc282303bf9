"""Children that die with plnt: the parent-death signal, set before the child's program runs.

Why: `plnt up` stops etcd, Temporal and the model server in order when it is asked to, but
a `plnt up` killed with SIGKILL (the OOM killer, `kill -9`, a test's clean-up) can stop
nothing, and its children would keep the ports, the data directory's lock and the model's
memory until someone finds them. With `prctl(PR_SET_PDEATHSIG, SIGTERM)` in the child the
kernel sends the child SIGTERM when its parent goes, however it goes.

How, without `preexec_fn`: `tethered(argv)` is a command line that runs a few lines of
Python (`python -I -S -c …`, about 20 ms, no site and no environment read) which set the
signal, exit at once if the parent is already gone (it may have died before the request
took effect), then `exec` `argv`. The signal survives `exec`, so etcd and `temporal`, Go
programs that cannot set it themselves, get it too, and the child's pid is the one
`Popen` returned. `preexec_fn` would run Python between fork and exec in a process with
threads (the asyncio default executor, the Temporal SDK's), which may deadlock.

The parent is a *thread*: the kernel signals the child when the thread that forked it
exits, not only the process. So `Popen(tethered(...))` must be called from a thread that
lives as long as the child should, the event loop's own (as `plnt.processes.apiprocesses`
does), never a pool's thread. Runner processes are never tethered: they outlive plnt on
purpose and the next start adopts them. The fork server (`plnt.processes.forkserver`) is
not either: it is started from a pool thread, and it already ends when plnt does, as
its control socket closes.

Outside Linux `tethered` returns `argv` unchanged.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

_PROGRAM = """\
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def tethered(argv: Sequence[str], *, parent: int | None = None) -> list[str]:
    """`argv` behind the parent-death wrapper: the child gets SIGTERM when the thread that
    starts it exits (see the module doc). `parent`: this process's pid unless given."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    owner = os.getpid() if parent is None else parent
    return [sys.executable, "-I", "-S", "-c", _PROGRAM, str(owner), *argv]
