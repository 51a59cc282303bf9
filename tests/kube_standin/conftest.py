"""One kube-apiserver stand-in per test module, and a token user per test.

The stand-in runs in its own thread and loop, so the same instance serves synchronous
kubectl tests and asynchronous client tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.kube import standin


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[standin.KubeStandIn]:
    with standin.running(tmp_path_factory.mktemp("kube-standin")) as running:
        yield running


@pytest.fixture
def token() -> str:
    return f"token-{uuid.uuid4().hex}"
