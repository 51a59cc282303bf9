"""Fixtures of the client tests: this package's etcd, and the in-process server's namespace.

The server, its kubeconfig and a client of it come from `tests/support/token_server.py`,
registered for the whole suite by `tests/conftest.py`.
"""

from __future__ import annotations

import pytest

from tests.support.etcd import etcd_endpoint_fixture

etcd_endpoint = etcd_endpoint_fixture()


@pytest.fixture
def namespace(server_namespace: str) -> str:
    """The test's fresh namespace on the in-process server (its kubeconfig's context)."""
    return server_namespace
