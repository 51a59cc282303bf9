"""Fixtures of the API server tests: the in-process server (`tests/support/api_server.py`)
on this package's etcd, one keyspace per test, and real runner processes."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plnt.apiserver import authn
from tests.support.api_server import Api, runner, serving
from tests.support.etcd import etcd_endpoint_fixture
from tests.support.llm import LLM, serving_llm
from tests.support.proxied import ALICE, BOB, ProxyStack

etcd_endpoint = etcd_endpoint_fixture()


@pytest.fixture
async def runner_a() -> AsyncIterator[str]:
    """A runner (a run's stable revision where two are needed)."""
    async with runner() as url:
        yield url


@pytest.fixture
async def runner_b() -> AsyncIterator[str]:
    """Another runner (the canary's, where one is the stable's)."""
    async with runner() as url:
        yield url


@pytest.fixture
async def api(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Api]:
    async with serving(etcd_endpoint, tmp_path) as client:
        yield client


@pytest.fixture
async def uncached_api(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Api]:
    """A server without the watch cache: reads and watches go straight to etcd."""
    async with serving(etcd_endpoint, tmp_path, watch_cache=False) as client:
        yield client


@pytest.fixture
def closed_endpoint() -> str:
    """A loopback URL nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
async def proxy_stack(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[ProxyStack]:
    """The API server with a token file: alice may invoke, bob is only authenticated."""
    token_file = tmp_path / "tokens.csv"
    authn.add_token(token_file, token=ALICE, user="alice", groups=["plnt:invokers"])
    authn.add_token(token_file, token=BOB, user="bob")
    async with serving(etcd_endpoint, tmp_path, token_file=token_file) as api:
        yield ProxyStack(api, token_file)


@pytest.fixture
async def llm() -> AsyncIterator[LLM]:
    async with serving_llm(None) as served:
        yield served
