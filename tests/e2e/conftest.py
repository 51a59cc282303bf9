"""Fixtures of the kubectl end-to-end tests: one real `plnt up` for them all, a kubectl per test.

One server for the whole package keeps the suite fast (each start costs seconds);
each test gets its own kubectl cache directory and its own namespace, so tests never
see each other's objects or discovery caches, and a test that lists across
namespaces looks only at its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.namespaces import create_namespace
from tests.support.plnt_server import Kubectl, PlntServer


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlntServer]:
    with PlntServer(tmp_path_factory.mktemp("plnt-state")) as srv:
        yield srv


@pytest.fixture
def kubectl(server: PlntServer, tmp_path: Path) -> Kubectl:
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    return Kubectl(kubeconfig=server.kubeconfig, cache_dir=cache)


@pytest.fixture
def namespace(server: PlntServer) -> str:
    """A fresh namespace, created (standalone plnt refuses objects in a missing one)."""
    return create_namespace(server.url, server.pki_dir, f"t-{uuid.uuid4().hex[:10]}")


@pytest.fixture
def ns(namespace: str) -> str:
    """The same namespace under the short name some modules use."""
    return namespace
