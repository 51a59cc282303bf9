"""The local target's pre-warmed runner server, with real runner processes.

Replicas forked from `plnt.runner.forkserver` must be indistinguishable, to the rest of
the local target, from executed ones: found by token, adopted, stopped, and left running
when the server goes away.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from plnt.processes import forkserver as local_forkserver
from plnt.runner import forkserver
from plnt.sagas.targets import interface, local, local_processes, local_records
from tests.support.local_target import MakeRevision, invoke, is_running, local_target_runner_pids
from tests.support.processes import kill_all
from tests.support.waiting import eventually


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[1])


@pytest.fixture
async def prewarmed(local_target_state_dir: Path) -> local.LocalTarget:
    target = local.LocalTarget(
        local_target_state_dir, ready_timeout=60.0, stop_timeout=5.0, prewarm=True
    )
    await target.start()
    try:
        yield target  # type: ignore[misc]
    finally:
        await target.close()


async def test_replicas_are_forked_by_the_server_found_by_token_and_outlive_it(
    prewarmed: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_state_dir: Path,
) -> None:
    replicas = await prewarmed.install(local_target_revision(replicas=2))
    assert prewarmed.forkserver is not None
    server = prewarmed.forkserver.pid
    assert server is not None

    assert {parent_of(r.pid) for r in replicas if r.pid} == {server}
    for replica in replicas:
        assert await invoke(replica.url, f"forked {replica.index}") == f"forked {replica.index}"
    assert local_target_runner_pids(local_target_state_dir) == {r.pid for r in replicas}

    # A target that executes its runners adopts the forked ones: same identity rules.
    executing = local.LocalTarget(local_target_state_dir, ready_timeout=60.0)
    adopted = await executing.install(local_target_revision(replicas=2))
    assert [r.pid for r in adopted] == [r.pid for r in replicas]

    await prewarmed.close()
    assert not is_running(server)
    for replica in replicas:
        assert replica.pid is not None and is_running(replica.pid)
        assert await invoke(replica.url, "still here") == "still here"

    await executing.teardown(local_target_revision().run)
    assert local_target_runner_pids(local_target_state_dir) == set()


async def test_a_killed_server_is_started_again_and_a_closed_one_falls_back_to_executing(
    prewarmed: local.LocalTarget,
    local_target_revision: MakeRevision,
) -> None:
    assert prewarmed.forkserver is not None
    prewarmed.forkserver.start()
    first_server = prewarmed.forkserver.pid
    assert first_server is not None
    os.kill(first_server, signal.SIGKILL)
    await eventually(lambda: not is_running(first_server), within=10, what="the server gone")

    [forked] = await prewarmed.install(local_target_revision(revision=1))
    second_server = prewarmed.forkserver.pid
    assert second_server not in (None, first_server)
    assert forked.pid is not None and parent_of(forked.pid) == second_server

    prewarmed.forkserver.close()
    [executed] = await prewarmed.install(local_target_revision(revision=2))
    assert executed.pid is not None and parent_of(executed.pid) != second_server
    assert local_processes.is_ours(
        executed.pid, _token(prewarmed, local_target_revision().run, executed)
    )
    assert await invoke(executed.url, "executed") == "executed"


def _token(target: local.LocalTarget, run: interface.RunRef, replica: interface.Replica) -> str:
    records = local_records.RunLayout(target.state_dir, run).records(replica.revision)
    [token] = [record.token for record in records if record.pid == replica.pid]
    return token


async def test_start_warms_the_server_before_any_install_even_in_a_fresh_state_dir(
    local_target_state_dir: Path,
) -> None:
    target = local.LocalTarget(local_target_state_dir / "not-yet", prewarm=True)
    await target.start()
    try:
        assert target.forkserver is not None
        server = await eventually(lambda: target.forkserver and target.forkserver.pid, within=60)
        assert is_running(server)
        assert not (local_target_state_dir / "not-yet" / "runs").exists()
    finally:
        await target.close()
    assert not is_running(server)


def test_the_server_forks_only_runner_command_lines() -> None:
    assert forkserver.runner_arguments(
        ["/usr/bin/python3", "-X", "plnt-replica=abc", "-m", "plnt.runner", "--port", "1"]
    ) == ["--port", "1"]
    for argv in (
        ["/usr/bin/python3", "-c", "print(1)"],
        ["/usr/bin/python3", "-m", "plnt.runner.forkserver"],
        ["/usr/bin/python3", "-X", "plnt-replica=abc", "-m", "os"],
        ["/bin/sh"],
    ):
        with pytest.raises(forkserver.RequestError, match="not a runner command line"):
            forkserver.runner_arguments(argv)


def test_a_refused_request_is_unavailable_and_the_server_keeps_serving(tmp_path: Path) -> None:
    server = local_forkserver.ForkServer(sys.executable)
    try:
        with pytest.raises(local_forkserver.Unavailable, match="not a runner command line"):
            server.spawn([sys.executable, "-c", "print(1)"], log_path=tmp_path / "log")
        pid = server.pid
        assert pid is not None and is_running(pid)
    finally:
        server.close()
    assert not is_running(pid)


async def test_the_server_ends_when_its_owner_dies_without_closing_it(tmp_path: Path) -> None:
    owner_script = (
        "import sys, time\n"
        "from plnt.processes.forkserver import ForkServer\n"
        "server = ForkServer(sys.executable)\n"
        "server.start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", owner_script, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    server_pid = 0
    try:
        assert owner.stdout is not None
        server_pid = int((await asyncio.wait_for(owner.stdout.readline(), 60)).decode())
        assert is_running(server_pid)
        owner.kill()
        await owner.wait()
        await eventually(
            lambda: not is_running(server_pid), within=10, what="the orphaned server to exit"
        )
    finally:
        if owner.returncode is None:
            owner.kill()
            await owner.wait()
        if server_pid:
            kill_all([server_pid])
