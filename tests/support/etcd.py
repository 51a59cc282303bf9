"""A real etcd for tests, in a temporary directory, on free loopback ports.

Reuse it from any test package:

    # conftest.py
    from tests.support.etcd import etcd_endpoint_fixture
    etcd_endpoint = etcd_endpoint_fixture()          # session-scoped, sync: yields "http://127.0.0.1:PORT"

    # or, inside one async test / fixture:
    async with running_etcd(tmp_path) as etcd:
        ...etcd.endpoint...

Settings tuned for tests: auto-compaction off (tests compact explicitly with
`EtcdStore.compact`), no fsync (speed; the data is thrown away), and watch
progress notifications every 100 ms so PROGRESS events arrive quickly. The
process is stopped and reaped when the context or the session ends, even when
a test fails.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from plnt.processes.etcd import EtcdProcess

TEST_SETTINGS: dict[str, Any] = {
    "auto_compaction_retention": "0",
    "unsafe_no_fsync": True,
    "progress_notify_interval": "100ms",
    "quota_backend_bytes": 512 * 1024**2,
}


def make_etcd(base_dir: Path, **overrides: Any) -> EtcdProcess:
    """An unstarted `EtcdProcess` with test settings, its data under `base_dir`."""
    return EtcdProcess(base_dir / "etcd-data", **{**TEST_SETTINGS, **overrides})


@contextlib.contextmanager
def etcd_running(base_dir: Path | None = None, **overrides: Any) -> Iterator[EtcdProcess]:
    """Blocking form: start etcd, yield it, always stop it."""
    with contextlib.ExitStack() as stack:
        if base_dir is None:
            base_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="etcd-")))
        etcd = make_etcd(base_dir, **overrides)
        with etcd:
            yield etcd


@contextlib.asynccontextmanager
async def running_etcd(base_dir: Path, **overrides: Any) -> AsyncIterator[EtcdProcess]:
    """Async form: `async with running_etcd(tmp_path) as etcd: etcd.endpoint`."""
    async with make_etcd(base_dir, **overrides) as etcd:
        yield etcd


def etcd_endpoint_fixture(
    scope: Literal["session", "package", "module", "class", "function"] = "session",
) -> Callable[..., Any]:
    """A pytest fixture (default session scope) yielding the endpoint of a shared etcd."""

    @pytest.fixture(scope=scope)
    def etcd_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        with etcd_running(tmp_path_factory.mktemp("etcd")) as etcd:
            yield etcd.endpoint

    return etcd_endpoint
