"""Every child of plnt starts where plnt says, with an environment plnt built, even when
plnt's own environment is full of variables its children's programs read as settings
(`tests.processes.hostile`): etcd, the Temporal dev server, the API server's workers, the
fork server and the runners, forked or executed. (The model server's turn is in
tests/model/test_plnt_up_model.py, on the real model.)"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from plnt.processes import apiprocesses
from plnt.processes.temporal import TemporalDevServer
from plnt.sagas.targets import interface, local
from plnt.storage.etcd import EtcdStore
from tests.processes.hostile import HOSTILE, environment_of, leaked, set_hostile
from tests.support.etcd import running_etcd
from tests.support.llm import LLM, serving_llm
from tests.support.processes import kill_all, live_processes

CHAT_SPEC = (Path(__file__).resolve().parents[2] / "examples" / "chat.workflow.yaml").read_bytes()
KEY_VARIABLE = "STAND_IN_API_KEY"
"""The variable a runner's backend config names as `apiKeyEnv`: passed to that runner only."""


async def test_etcd_serves_on_plnts_ports_and_data_dir_whatever_etcd_variables_are_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_hostile(monkeypatch)
    async with running_etcd(tmp_path) as etcd, EtcdStore(etcd.endpoint) as store:
        assert etcd.pid is not None and leaked(etcd.pid) == set()
        created = await store.create("/kept", b"v")
        assert await store.get("/kept") == created
    assert (tmp_path / "etcd-data" / "member").is_dir()
    assert not await asyncio.to_thread(Path(HOSTILE["ETCD_DATA_DIR"]).exists)


async def test_temporal_serves_on_plnts_address_whatever_temporal_variables_are_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_hostile(monkeypatch)
    server = TemporalDevServer(tmp_path / "t.db", ui_port=None, start_timeout=30)
    try:
        await server.astart()
        assert server.pid is not None and leaked(server.pid) == set()
        client = await Client.connect(server.address)
        assert client.namespace == "default"
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace="default")  # the namespace plnt asked for
        )
        assert described.namespace_info.name == "default"
    finally:
        await server.astop()


LISTENER = textwrap.dedent(
    """
    import signal
    from plnt.processes import apiprocesses
    slot = apiprocesses.Slot.from_environment()
    apiprocesses.die_with_parent(slot.parent)
    apiprocesses.announce_ready(slot)
    signal.sigwait({signal.SIGTERM})
    """
)


async def test_an_api_worker_gets_its_slot_and_plnts_settings_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_hostile(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    monkeypatch.setenv("OPENAI_API_KEY", "not-for-workers")
    directory = apiprocesses.make_directory(tmp_path / "w")
    child = apiprocesses.SiblingProcess(
        [sys.executable, "-c", LISTENER], apiprocesses.Slot(1, 2, directory, parent=os.getpid())
    )
    async with apiprocesses.running([child]):
        assert child.pid is not None
        environment = environment_of(child.pid)
        assert json.loads(environment[apiprocesses.SLOT_ENV])["index"] == 1
        assert environment["KUBECONFIG"] == str(tmp_path / "kubeconfig")
        assert leaked(child.pid) == set() and "OPENAI_API_KEY" not in environment


@pytest.fixture
async def stand_in() -> AsyncIterator[tuple[LLM, str]]:
    """An OpenAI stand-in that answers only with its token, and the token."""
    token = secrets.token_hex(8)
    async with serving_llm(token) as llm:
        yield llm, token


@pytest.mark.parametrize("prewarm", [True, False], ids=["forked", "executed"])
async def test_a_runner_gets_its_backends_key_and_no_hostile_variable(
    prewarm: bool,
    stand_in: tuple[LLM, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    llm, token = stand_in
    set_hostile(monkeypatch)
    monkeypatch.setenv(KEY_VARIABLE, token)
    monkeypatch.setenv("OPENAI_API_KEY", "not-for-this-runner")
    state = tmp_path / "runners"
    target = local.LocalTarget(state, ready_timeout=60.0, stop_timeout=5.0, prewarm=prewarm)
    revision = interface.Revision(
        run=interface.RunRef(namespace="default", name="chat", uid=uuid.uuid4().hex[:12]),
        revision=1,
        digest="sha256:" + hashlib.sha256(CHAT_SPEC).hexdigest(),
        spec=CHAT_SPEC,
        backend=interface.BackendConfig(
            type="openai", endpoint=llm.url, model="m", api_key_env=KEY_VARIABLE
        ),
    )
    try:
        await target.start()
        (replica,) = await target.install(revision)
        assert replica.pid is not None
        assert replica.url.startswith("http://127.0.0.1:")  # where the target said
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{replica.url}/invoke", json={"inputs": {"question": "hi"}}) as answer,
        ):
            assert answer.status == 200, await answer.text()
            assert (await answer.json())["output"] == "stand-in: hi"
        assert llm.seen == [f"Bearer {token}"]  # the key the backend config named

        if prewarm:  # the server's own environment: built, without the runner's key
            assert target.forkserver is not None and target.forkserver.pid is not None
            server = environment_of(target.forkserver.pid)
            assert not set(HOSTILE) & set(server) and KEY_VARIABLE not in server
        else:  # an executed runner's environment is the one it was given
            environment = environment_of(replica.pid)
            assert environment[KEY_VARIABLE] == token
            assert leaked(replica.pid) == set() and "OPENAI_API_KEY" not in environment
    finally:
        await target.close()
        await asyncio.to_thread(local.stop_all, state, timeout=5.0)
        kill_all(live_processes("plnt.runner", str(state)))
