"""The local target's runners, seen from outside: which processes run, and what they answer.

`local_target_runner_pids(state_dir)` finds live runner processes by the state directory
in their command line (reaping our own exited children first), `is_running(pid)` tells a
live process from a zombie, and `invoke(url, question)` asks a runner directly.
`CHAT_SPEC` is the chat example's bytes and `MakeRevision` the type of the
`local_target_revision` fixture of tests/sagas.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from plnt.sagas.targets import interface
from tests.support.examples import EXAMPLES
from tests.support.processes import live_processes

CHAT_SPEC = (EXAMPLES / "chat.workflow.yaml").read_bytes()
MakeRevision = Callable[..., interface.Revision]


def local_target_runner_pids(state_dir: Path) -> set[int]:
    """Live (non-zombie) runner processes whose command line names `state_dir`.

    Our own exited children are reaped first, so they do not linger as zombies.
    """
    found = live_processes("plnt.runner", str(state_dir))
    for pid in list(found):
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                found.discard(pid)
    return found


def is_running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (reaping it if it is our child)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


async def invoke(url: str, question: str) -> Any:
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/invoke", json={"inputs": {"question": question}}) as response,
    ):
        assert response.status == 200
        return (await response.json())["output"]
