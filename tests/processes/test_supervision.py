"""Supervised children come back after dying: same ports, same data, backoff between tries."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from plnt.processes import supervision
from plnt.processes.supervision import Backoff, supervising
from plnt.processes.temporal import TemporalDevServer
from plnt.storage import errors
from plnt.storage.etcd import EtcdStore
from tests.support.etcd import running_etcd
from tests.support.waiting import eventually


async def test_a_killed_etcd_is_started_again_on_its_port_with_its_data(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=supervision.__name__)
    async with running_etcd(tmp_path) as etcd, EtcdStore(etcd.endpoint) as store:
        written = await store.create("/kept", b"before the kill")
        endpoint, old_pid = etcd.endpoint, etcd.pid
        assert old_pid is not None
        async with supervising(etcd, what="etcd") as supervisor:
            os.kill(old_pid, signal.SIGKILL)

            async def read() -> bool:
                try:
                    return await store.get("/kept") == written
                except errors.Unavailable:
                    return False

            assert await eventually(read, within=30, what="the key through the same channel")
            # etcd may serve before the supervisor's restart has returned and been counted.
            await eventually(lambda: supervisor.restarts == 1, within=30, what="one restart")
            assert supervisor.restarts == 1
        assert etcd.endpoint == endpoint and etcd.pid not in (None, old_pid)
    assert (
        f"etcd (pid {old_pid}) exited with code -9 (SIGKILL); restarting it in 0.1 s"
        in caplog.messages
    )


async def test_a_killed_temporal_dev_server_is_started_again_on_its_port(tmp_path: Path) -> None:
    server = TemporalDevServer(tmp_path / "t.db", ui_port=None)
    await server.astart()
    try:
        client = await Client.connect(server.address)
        address, old_pid = server.address, server.pid
        assert old_pid is not None
        async with supervising(server, what="temporal") as supervisor:
            os.kill(old_pid, signal.SIGKILL)
            await eventually(lambda: supervisor.restarts == 1, within=30, what="a restart")
            # The client made before the kill reaches the new server by itself.
            info = await client.workflow_service.get_system_info(GetSystemInfoRequest())
            assert info.server_version
        assert server.address == address and server.pid not in (None, old_pid)
    finally:
        await server.astop()


class FlakyChild:
    """A child that has exited, fails `failures` restarts, then runs until told to exit."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.code: int | None = 1
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return 4242

    def exit_code(self) -> int | None:
        return self.code

    async def arestart(self) -> None:
        self.restarts += 1
        if self.restarts <= self.failures:
            raise RuntimeError(f"start {self.restarts} failed")
        self.code = None


async def test_a_child_that_fails_to_start_is_tried_again_and_each_exit_is_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=supervision.__name__)
    child = FlakyChild(failures=3)
    backoff = Backoff(initial=0.01, maximum=0.04)
    async with supervising(child, what="flaky", backoff=backoff) as supervisor:
        await eventually(lambda: supervisor.restarts == 1, what="the first restart")
        assert child.restarts == 4
        assert caplog.messages[0] == "flaky (pid 4242) exited with code 1; restarting it in 0.0 s"
        assert [m.split(";")[0] for m in caplog.messages[1:]] == [
            f"flaky did not restart (start {n} failed)" for n in (1, 2, 3)
        ]
        caplog.clear()
        child.code = -signal.SIGTERM
        await eventually(lambda: supervisor.restarts == 2, what="the second restart")
    assert caplog.messages == [
        "flaky (pid 4242) exited with code -15 (SIGTERM); restarting it in 0.0 s"
    ]
    assert child.restarts == 5


def test_the_delay_doubles_up_to_its_maximum_and_resets_after_a_healthy_spell() -> None:
    backoff = Backoff(initial=0.1, maximum=5.0, reset_after=30.0)
    delays = [0.1]
    for _ in range(7):
        delays.append(backoff.next(delays[-1]))
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert backoff.after_exit(5.0, uptime=30.0) == 0.1  # up long enough: healthy
    assert backoff.after_exit(5.0, uptime=2.0) == 5.0  # died young: keep backing off
