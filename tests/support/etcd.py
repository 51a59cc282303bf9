"""A real etcd for tests, in a temporary directory, on free loopback ports.

Reuse it from any test package:

    # conftest.py
    from tests.support.etcd import etcd_endpoint_fixture
    etcd_endpoint = etcd_endpoint_fixture()          # session-scoped, sync: yields "http://127.0.0.1:PORT"

    # or, inside one async test / fixture:
    async with running_etcd(tmp_path) as etcd:
        ...etcd.endpoint...

    # an etcd that serves TLS and requires client certificates (etcd.tls has the files):
    async with running_tls_etcd(tmp_path) as etcd:
        EtcdStore(etcd.endpoint, ca_file=etcd.tls.ca, cert_file=..., key_file=...)

Settings tuned for tests: auto-compaction off (tests compact explicitly with
`EtcdStore.compact`), no fsync (speed; the data is thrown away), and watch
progress notifications every 100 ms so PROGRESS events arrive quickly. The
process is stopped and reaped when the context or the session ends, even when
a test fails.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import tempfile
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from plnt.apiserver import pki
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


@dataclass(frozen=True, slots=True)
class EtcdTls:
    """Files for an etcd that serves TLS and requires client certificates."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_etcd_tls(directory: Path) -> EtcdTls:
    """A throwaway CA, a serving certificate for 127.0.0.1 and a client certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = pki.CertificateAuthority.create("etcd-test-ca")
    server = pki.issue_serving_certificate(ca, sans=["127.0.0.1"], common_name="etcd")
    client = pki.issue_client_certificate(ca, common_name="plnt-apiserver")
    files = EtcdTls(
        ca=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
    )
    files.ca.write_bytes(ca.cert_pem)
    files.server_cert.write_bytes(server[0])
    files.server_key.write_bytes(server[1])
    files.client_cert.write_bytes(client[0])
    files.client_key.write_bytes(client[1])
    return files


class TlsEtcdProcess(EtcdProcess):
    """etcd serving clients over TLS with `--client-cert-auth` (peers stay plaintext)."""

    def __init__(self, data_dir: Path, *, tls: EtcdTls, **settings: Any) -> None:
        super().__init__(data_dir, **settings)
        self.tls = tls

    @property
    def endpoint(self) -> str:
        return f"https://{self.host}:{self.client_port}"

    def command(self) -> list[str]:
        plain = f"http://{self.host}:{self.client_port}"
        cmd = [arg.replace(plain, self.endpoint) for arg in super().command()]
        return [
            *cmd,
            f"--cert-file={self.tls.server_cert}",
            f"--key-file={self.tls.server_key}",
            f"--trusted-ca-file={self.tls.ca}",
            "--client-cert-auth",
        ]

    def _healthy_sync(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.tls.ca))
        context.load_cert_chain(self.tls.client_cert, self.tls.client_key)
        try:
            with urllib.request.urlopen(
                f"{self.endpoint}/health", timeout=1.0, context=context
            ) as resp:
                body = json.loads(resp.read())
        except (OSError, ValueError):
            return False
        return isinstance(body, dict) and body.get("health") == "true"


@contextlib.asynccontextmanager
async def running_tls_etcd(base_dir: Path, **overrides: Any) -> AsyncIterator[TlsEtcdProcess]:
    """An etcd that only talks TLS with client certificates (files under `base_dir/tls`)."""
    tls = make_etcd_tls(base_dir / "tls")
    async with TlsEtcdProcess(
        base_dir / "etcd-data", tls=tls, **{**TEST_SETTINGS, **overrides}
    ) as etcd:
        yield etcd
