"""The `plnt` CLI as a child process against the in-process API server of the client tests.

`cli` runs `python -m plnt.cli ARGS` with its own HOME and KUBECONFIG (a kubeconfig
for the test's server, context namespace = the test's namespace) without blocking
the event loop that serves the API; the child is killed and reaped on timeout or
failure (`tests/support/cli.py`). The server, its kubeconfig and a client of it come
from `tests/support/token_server.py`, registered for the whole suite by
`tests/conftest.py`; this package runs it on an etcd of its own.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.cli import Cli, Result, cli_env, run_process
from tests.support.etcd import etcd_endpoint_fixture

etcd_endpoint = etcd_endpoint_fixture()


@pytest.fixture
def namespace(server_namespace: str) -> str:
    """The test's fresh namespace on the in-process server (its kubeconfig's context)."""
    return server_namespace


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli(admin_kubeconfig: Path, home: Path) -> Cli:
    """`await cli("list", "-o", "json")` → Result; `env=` replaces the environment."""

    async def run(
        *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> Result:
        environment = env if env is not None else cli_env(home, admin_kubeconfig)
        return await run_process(
            [sys.executable, "-m", "plnt.cli", *args], env=environment, stdin=stdin
        )

    return run
