"""The chart's etcd command line and certificates, run by a real etcd 3.5.

The StatefulSet's arguments are run as rendered, except what only a pod has: its name,
its data directory, the files' mount path, and the DNS names in its URLs (loopback
addresses and free ports here). Then the probes' paths answer, a client without a
certificate is refused, and plnt's own etcd client (`EtcdStore`, as `plnt serve` builds
it from --etcd-cafile/--etcd-certfile/--etcd-keyfile) writes and reads with the
chart's client certificate. Peer traffic between members needs more than one pod and
is not exercised here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from plnt.processes.etcd import etcd_binary
from plnt.processes.ports import free_port
from plnt.storage.etcd import EtcdStore
from tests.charts import rendering
from tests.charts.rendering import Rendered
from tests.support.waiting import eventually

Render = Callable[[str], Rendered]
POD_ONLY = {
    "name",
    "data-dir",
    "listen-client-urls",
    "advertise-client-urls",
    "listen-peer-urls",
    "initial-advertise-peer-urls",
    "initial-cluster",
    "listen-metrics-urls",
}


@contextlib.contextmanager
def running(command: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def http_get(url: str, context: ssl.SSLContext | None = None) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            body: dict = json.loads(resp.read())
            return body
    except (OSError, ValueError):
        return None


def https_get(url: str, context: ssl.SSLContext) -> dict:
    """GET over TLS, letting a refused handshake raise."""
    with urllib.request.urlopen(url, timeout=2, context=context) as resp:
        body: dict = json.loads(resp.read())
        return body


async def test_real_etcd_runs_the_charts_flags_and_accepts_only_the_charts_client(
    rendered: Render, tmp_path: Path
) -> None:
    r = rendered("default")
    sts = r.one("StatefulSet", "plnt-etcd")
    etcd = rendering.container(sts, "etcd")
    tls = tmp_path / "tls"
    tls.mkdir()
    for secret_name, prefix in [("plnt-etcd-server-tls", ""), ("plnt-etcd-client-tls", "client-")]:
        secret = r.one("Secret", secret_name)
        for key in ("ca.crt", "tls.crt", "tls.key"):
            (tls / f"{prefix}{key}").write_bytes(rendering.secret_bytes(secret, key))

    client, peer, metrics = free_port(), free_port(), free_port()
    local = {
        "name": "plnt-etcd-0",
        "data-dir": str(tmp_path / "data"),
        "listen-client-urls": f"https://127.0.0.1:{client}",
        "advertise-client-urls": f"https://127.0.0.1:{client}",
        "listen-peer-urls": f"https://127.0.0.1:{peer}",
        "initial-advertise-peer-urls": f"https://127.0.0.1:{peer}",
        "initial-cluster": f"plnt-etcd-0=https://127.0.0.1:{peer}",
        "listen-metrics-urls": f"http://127.0.0.1:{metrics}",
    }
    rendered_flags = rendering.flags(etcd["args"])
    assert set(rendered_flags) >= POD_ONLY
    args = []
    for flag, value in rendered_flags.items():
        value = local.get(flag, value)
        if value is not None:
            value = value.replace("/etc/etcd/tls/", f"{tls}/")
        args.append(f"--{flag}" if value is None else f"--{flag}={value}")
    assert etcd["command"] == ["etcd"]

    with running([str(etcd_binary()), *args], tmp_path / "etcd.log") as proc:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            path = etcd[probe]["httpGet"]["path"]
            url = f"http://127.0.0.1:{metrics}{path}"
            health = await eventually(
                lambda url=url: proc.poll() is None and http_get(url),
                within=30,
                what=f"etcd to answer {path} (log: {tmp_path / 'etcd.log'})",
            )
            assert health["health"] == "true"

        url = f"https://127.0.0.1:{client}/health"
        anonymous = ssl.create_default_context(cafile=str(tls / "ca.crt"))
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            await asyncio.to_thread(https_get, url, anonymous)
        with_cert = ssl.create_default_context(cafile=str(tls / "client-ca.crt"))
        with_cert.load_cert_chain(tls / "client-tls.crt", tls / "client-tls.key")
        assert (await asyncio.to_thread(https_get, url, with_cert))["health"] == "true"

        async with EtcdStore(
            f"https://127.0.0.1:{client}",
            key_prefix=rendered_flags_prefix(r),
            ca_file=tls / "client-ca.crt",
            cert_file=tls / "client-tls.crt",
            key_file=tls / "client-tls.key",
        ) as store:
            created = await store.create("/plnt.work/workflowruns/default/x", b"{}")
            assert (await store.get("/plnt.work/workflowruns/default/x")).value == b"{}"
            assert created.mod_revision > 0


def rendered_flags_prefix(r: Rendered) -> str:
    args = rendering.container(r.one("Deployment", "plnt-apiserver"), "apiserver")["args"]
    prefix = rendering.flags(args[1:])["etcd-prefix"]
    assert prefix
    return prefix
