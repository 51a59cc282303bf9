"""The local target with real runner processes (echo backend) on loopback ports."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from plnt.processes.ports import free_port
from plnt.sagas.targets import interface, local, local_records
from tests.support.llm import serving_llm
from tests.support.local_target import (
    CHAT_SPEC,
    MakeRevision,
    invoke,
    is_running,
    local_target_runner_pids,
)
from tests.support.waiting import eventually


@pytest.fixture
async def foreign_process() -> AsyncIterator[int]:
    """A process that is not a runner (a sleeping Python); killed and reaped at the end."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(600)", stdin=subprocess.DEVNULL
    )
    try:
        yield process.pid
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def test_install_starts_ready_replicas_that_answer_invoke(
    local_target: local.LocalTarget, local_target_revision: MakeRevision
) -> None:
    replicas = await local_target.install(local_target_revision(replicas=2))

    assert [(replica.index, replica.ready) for replica in replicas] == [(0, True), (1, True)]
    assert len({replica.url for replica in replicas}) == 2
    for replica in replicas:
        assert await invoke(replica.url, f"hello {replica.index}") == f"hello {replica.index}"


async def test_installing_twice_adopts_the_replicas_instead_of_starting_more(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_state_dir: Path,
) -> None:
    first = await local_target.install(local_target_revision(replicas=2))
    second = await local_target.install(local_target_revision(replicas=2))

    assert [replica.pid for replica in second] == [replica.pid for replica in first]
    assert local_target_runner_pids(local_target_state_dir) == {r.pid for r in first}


async def test_a_fresh_target_on_the_same_state_dir_adopts_the_running_replicas(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_state_dir: Path,
) -> None:
    first = await local_target.install(local_target_revision(replicas=2))

    restarted_worker = local.LocalTarget(local_target_state_dir, ready_timeout=60.0)
    again = await restarted_worker.install(local_target_revision(replicas=2))

    assert [replica.pid for replica in again] == [replica.pid for replica in first]
    assert local_target_runner_pids(local_target_state_dir) == {r.pid for r in first}


async def test_install_restarts_a_replica_whose_process_was_killed(
    local_target: local.LocalTarget, local_target_revision: MakeRevision
) -> None:
    first = await local_target.install(local_target_revision(replicas=2))
    killed = first[0].pid
    assert killed is not None
    os.kill(killed, signal.SIGKILL)
    await eventually(lambda: not is_running(killed))

    second = await local_target.install(local_target_revision(replicas=2))

    assert second[0].pid != killed
    assert second[1].pid == first[1].pid
    assert await invoke(second[0].url, "back") == "back"


async def test_a_record_whose_pid_now_belongs_to_another_process_is_not_adopted(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_state_dir: Path,
    local_target_run: interface.RunRef,
    foreign_process: int,
) -> None:
    first = await local_target.install(local_target_revision())
    layout = local_records.RunLayout(local_target_state_dir, local_target_run)
    record = layout.read_record(1, 0)
    assert record is not None and first[0].pid is not None
    os.kill(first[0].pid, signal.SIGKILL)
    await eventually(lambda: not is_running(first[0].pid or 0))
    layout.write_record(replace(record, pid=foreign_process))

    second = await local_target.install(local_target_revision())

    assert second[0].pid not in (foreign_process, first[0].pid)
    assert local_target_runner_pids(local_target_state_dir) == {second[0].pid}
    await local_target.teardown(local_target_run)
    assert is_running(foreign_process)


async def test_a_record_written_just_before_a_crashed_spawn_finds_its_process_by_token(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_state_dir: Path,
    local_target_run: interface.RunRef,
) -> None:
    first = await local_target.install(local_target_revision())
    layout = local_records.RunLayout(local_target_state_dir, local_target_run)
    record = layout.read_record(1, 0)
    assert record is not None
    layout.write_record(replace(record, pid=None))

    second = await local_target.install(local_target_revision())

    assert second[0].pid == first[0].pid
    assert local_target_runner_pids(local_target_state_dir) == {first[0].pid}


async def test_an_install_cancelled_while_waiting_leaves_replicas_a_retry_adopts(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_state_dir: Path,
    local_target_run: interface.RunRef,
) -> None:
    layout = local_records.RunLayout(local_target_state_dir, local_target_run)
    attempt = asyncio.create_task(local_target.install(local_target_revision(replicas=2)))
    await eventually(lambda: len([r for r in layout.records() if r.pid is not None]) == 2)
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    started = {record.pid for record in layout.records()}

    retried = await local_target.install(local_target_revision(replicas=2))

    assert {replica.pid for replica in retried} == started
    assert local_target_runner_pids(local_target_state_dir) == started


async def test_scale_adds_replicas_and_removes_the_highest_indexes_first(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_run: interface.RunRef,
    local_target_state_dir: Path,
) -> None:
    (only,) = await local_target.install(local_target_revision(replicas=1))

    grown = await local_target.scale(local_target_revision(replicas=3))
    assert [replica.index for replica in grown] == [0, 1, 2]
    assert grown[0].pid == only.pid
    assert all(replica.ready for replica in grown)

    shrunk = await local_target.scale(local_target_revision(replicas=2))
    assert [(replica.index, replica.pid) for replica in shrunk] == [
        (0, grown[0].pid),
        (1, grown[1].pid),
    ]
    assert not is_running(grown[2].pid or 0)
    listed = await local_target.replicas(local_target_run, 1)
    assert [replica.index for replica in listed] == [0, 1]
    assert local_target_runner_pids(local_target_state_dir) == {r.pid for r in shrunk}


async def test_replicas_and_revisions_report_the_live_replicas(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_run: interface.RunRef,
) -> None:
    assert await local_target.revisions(local_target_run) == []
    assert await local_target.replicas(local_target_run, 1) == []
    installed = await local_target.install(local_target_revision(1, replicas=2))
    await local_target.install(local_target_revision(2))

    assert await local_target.revisions(local_target_run) == [1, 2]
    assert await local_target.replicas(local_target_run, 1) == installed

    killed = installed[1].pid or 0
    os.kill(killed, signal.SIGKILL)
    await eventually(lambda: not is_running(killed))
    assert await local_target.replicas(local_target_run, 1) == installed[:1]


async def test_retire_and_teardown_stop_every_process_and_are_idempotent(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_run: interface.RunRef,
    local_target_state_dir: Path,
) -> None:
    old = await local_target.install(local_target_revision(1, replicas=2))
    new = await local_target.install(local_target_revision(2))

    await local_target.retire(local_target_run, 1)
    await local_target.retire(local_target_run, 1)
    assert not any(is_running(replica.pid or 0) for replica in old)
    assert await local_target.revisions(local_target_run) == [2]

    await local_target.teardown(local_target_run)
    await local_target.teardown(local_target_run)
    await local_target.retire(local_target_run, 2)
    assert not is_running(new[0].pid or 0)
    assert local_target_runner_pids(local_target_state_dir) == set()
    assert not local_records.RunLayout(local_target_state_dir, local_target_run).root.exists()


async def test_an_invalid_spec_fails_install_naming_the_cause_and_leaves_nothing_running(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_run: interface.RunRef,
    local_target_state_dir: Path,
) -> None:
    invalid = CHAT_SPEC.replace(b"id: answer", b"id: a-b")

    with pytest.raises(interface.InstallFailed) as failure:
        await local_target.install(local_target_revision(spec=invalid, replicas=2))

    assert "steps[0](id=a-b).id" in str(failure.value)
    assert "replica 0" in str(failure.value) and "replica 1" in str(failure.value)
    assert local_target_runner_pids(local_target_state_dir) == set()
    assert await local_target.revisions(local_target_run) == []


async def test_replicas_not_ready_by_the_deadline_are_stopped_and_reported(
    local_target_state_dir: Path, local_target_revision: MakeRevision
) -> None:
    impatient = local.LocalTarget(local_target_state_dir, ready_timeout=0.0)

    with pytest.raises(interface.InstallFailed, match="not ready within 0s"):
        await impatient.install(local_target_revision())

    assert local_target_runner_pids(local_target_state_dir) == set()


async def test_concurrent_installs_of_one_revision_start_exactly_the_replica_count(
    local_target_state_dir: Path, local_target_revision: MakeRevision
) -> None:
    workers = [local.LocalTarget(local_target_state_dir, ready_timeout=60.0) for _ in range(3)]

    results = await asyncio.gather(
        *(worker.install(local_target_revision(replicas=2)) for worker in workers)
    )

    pids = [[replica.pid for replica in result] for result in results]
    assert pids[0] == pids[1] == pids[2]
    assert local_target_runner_pids(local_target_state_dir) == set(pids[0])


async def test_a_replica_that_loses_its_port_race_is_restarted_on_another_port(
    local_target_state_dir: Path, local_target_revision: MakeRevision
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        taken_port = int(taken.getsockname()[1])
        ports = iter([taken_port])
        target = local.LocalTarget(
            local_target_state_dir,
            ready_timeout=60.0,
            port_picker=lambda: next(ports, None) or free_port(),
        )

        (replica,) = await target.install(local_target_revision())

    assert replica.ready
    assert not replica.url.endswith(f":{taken_port}")
    assert local_target_runner_pids(local_target_state_dir) == {replica.pid}


async def test_install_heartbeats_while_it_waits_for_readiness(
    local_target: local.LocalTarget, local_target_revision: MakeRevision
) -> None:
    beats: list[Any] = []

    await local_target.install(local_target_revision(), heartbeat=beats.append)

    assert beats and beats[0]["revision"] == 1


async def test_stop_all_stops_every_recorded_runner_and_counts_them(
    local_target: local.LocalTarget,
    local_target_revision: MakeRevision,
    local_target_state_dir: Path,
) -> None:
    await local_target.install(local_target_revision(1, replicas=2))
    await local_target.install(local_target_revision(2))

    assert await asyncio.to_thread(local.stop_all, local_target_state_dir) == 3
    assert local_target_runner_pids(local_target_state_dir) == set()
    assert await asyncio.to_thread(local.stop_all, local_target_state_dir) == 0


def test_a_run_key_that_cannot_name_a_directory_is_refused(local_target_state_dir: Path) -> None:
    with pytest.raises(local_records.InvalidRunKey):
        local_records.RunLayout(
            local_target_state_dir, interface.RunRef(namespace="..", name="x", uid="1")
        )


def _keyed_revision(make: MakeRevision, endpoint: str) -> interface.Revision:
    """The chat example on an OpenAI-compatible backend whose key is Secret llm/token."""
    backend = interface.BackendConfig(
        name="llm",
        type="openai",
        endpoint=endpoint,
        model="stand-in",
        credentials=interface.SecretKeyRef("llm", "token"),
    )
    return replace(make(), backend=backend)


async def test_a_backend_key_reaches_the_backend_from_the_secret_file_and_nowhere_else(
    local_target_state_dir: Path, local_target_revision: MakeRevision, tmp_path: Path
) -> None:
    secrets_dir = tmp_path / "secrets"
    (secrets_dir / "llm").mkdir(parents=True)
    (secrets_dir / "llm" / "token").write_text("sk-local-123\n")
    target = local.LocalTarget(
        local_target_state_dir, ready_timeout=60.0, stop_timeout=5.0, secrets_dir=secrets_dir
    )
    async with serving_llm("sk-local-123") as llm:
        revision = _keyed_revision(local_target_revision, llm.url)
        [replica] = await target.install(revision)
        assert await invoke(replica.url, "what is plnt?") == "stand-in: what is plnt?"
    assert llm.seen == ["Bearer sk-local-123"]
    assert holders_of(b"sk-local", local_target_state_dir) == []


def holders_of(secret: bytes, state_dir: Path) -> list[str]:
    """Files under `state_dir`, and runner command lines, that contain `secret`."""
    files = [path for path in state_dir.rglob("*") if path.is_file()]
    assert files, "the target wrote nothing"
    holders = [str(path) for path in files if secret in path.read_bytes()]
    for pid in local_target_runner_pids(state_dir):
        if secret in Path(f"/proc/{pid}/cmdline").read_bytes():
            holders.append(f"pid {pid} command line")
    return holders


async def test_a_missing_secret_file_fails_install_naming_it_and_starts_nothing(
    local_target_state_dir: Path, local_target_revision: MakeRevision, tmp_path: Path
) -> None:
    secrets_dir = tmp_path / "secrets"
    target = local.LocalTarget(local_target_state_dir, secrets_dir=secrets_dir)
    revision = _keyed_revision(local_target_revision, "http://127.0.0.1:1/v1")
    with pytest.raises(interface.CredentialsMissing) as caught:
        await target.install(revision)
    message = str(caught.value)
    assert 'PlntBackend "llm" credentialsRef llm/token' in message
    assert f"no secret file {secrets_dir / 'llm' / 'token'}" in message
    assert local_target_runner_pids(local_target_state_dir) == set()
    without = local.LocalTarget(local_target_state_dir)
    with pytest.raises(interface.CredentialsMissing, match="no secrets directory"):
        await without.install(revision)


@pytest.mark.parametrize(("name", "key"), [("..", "token"), ("a/b", "token"), ("llm", "../x")])
def test_a_secret_reference_that_would_leave_the_secrets_directory_is_refused(
    tmp_path: Path, name: str, key: str
) -> None:
    with pytest.raises(interface.CredentialsMissing, match="cannot name"):
        local_records.secret_path(tmp_path, name, key)
