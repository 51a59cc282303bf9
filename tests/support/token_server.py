"""An in-process plnt API server (real TLS, real etcd) that also accepts static bearer tokens,
and kubeconfig files pointing at it: what the client and CLI tests talk to.

It accepts three static bearer tokens: `admin-token` (system:masters), `nobody-token` (no
rights) and `invoker-token` (user `invoker`, whom only a test's own policy grants
anything). The fixtures (`server`, `server_namespace`, `admin_kubeconfig`, `client`,
`runner_url`) are registered for the whole suite by `tests/conftest.py`; `server` needs
an `etcd_endpoint` fixture, which each package that uses it defines for itself
(`tests/support/etcd.py`), and the client and CLI packages name `server_namespace`
`namespace` for their tests.
"""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestServer

from plnt.apiserver import app as app_module
from plnt.apiserver import pki as pki_module
from plnt.apiserver.settings import ServerSettings
from plnt.client import PlntClient, kubeconfig
from plnt.runner import app as runner_app
from plnt.runner import settings as runner_settings
from tests.support import tls
from tests.support.examples import EXAMPLES

DIGEST = "sha256:" + "cd" * 32
ADMIN_TOKEN = "admin-token"
NOBODY_TOKEN = "nobody-token"
INVOKER_TOKEN = "invoker-token"


def workflowrun(name: str, *, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    """A valid WorkflowRun body."""
    body: dict[str, Any] = {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}}
    body.update(spec)
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "plnt.work/v1", "kind": "WorkflowRun", "metadata": metadata, "spec": body}


@dataclass(frozen=True)
class Server:
    """The server under test: its URL and PKI."""

    url: str
    pki: pki_module.Pki


def write_kubeconfig(
    path: Path,
    server: Server,
    *,
    inline: bool = True,
    token: str | None = None,
    namespace: str | None = None,
    context: str = "plnt",
    current: bool = True,
    extra: dict[str, Any] | None = None,
) -> Path:
    """A kubeconfig for `server`: admin certificate (inline data or files beside it) or a token.

    File references are written relative to the kubeconfig's directory, as kubectl allows.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    cluster: dict[str, Any] = {"server": server.url}
    user: dict[str, Any] = {}
    if inline:
        cluster["certificate-authority-data"] = _b64(server.pki.ca_cert)
    else:
        (path.parent / "certs").mkdir(exist_ok=True)
        (path.parent / "certs" / "ca.crt").write_bytes(server.pki.ca_cert.read_bytes())
        cluster["certificate-authority"] = "certs/ca.crt"
    if token is not None:
        user["token"] = token
    elif inline:
        user["client-certificate-data"] = _b64(server.pki.admin_cert)
        user["client-key-data"] = _b64(server.pki.admin_key)
    else:
        (path.parent / "certs" / "admin.crt").write_bytes(server.pki.admin_cert.read_bytes())
        (path.parent / "certs" / "admin.key").write_bytes(server.pki.admin_key.read_bytes())
        user["client-certificate"] = "certs/admin.crt"
        user["client-key"] = "certs/admin.key"
    ctx: dict[str, Any] = {"cluster": f"{context}-cluster", "user": f"{context}-user"}
    if namespace:
        ctx["namespace"] = namespace
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": f"{context}-cluster", "cluster": cluster}],
        "users": [{"name": f"{context}-user", "user": user}],
        "contexts": [{"name": context, "context": ctx}],
    }
    if current:
        document["current-context"] = context
    document.update(extra or {})
    path.write_text(yaml.safe_dump(document))
    return path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def _token_file(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    tokens = directory / "tokens.csv"
    tokens.write_text(
        f'{ADMIN_TOKEN},admin,1,"system:masters"\n{NOBODY_TOKEN},nobody,2\n'
        f"{INVOKER_TOKEN},invoker,3\n"
    )
    return tokens


@contextlib.asynccontextmanager
async def serving(
    etcd_endpoint: str, tmp_path: Path, *, policy: dict[str, Any] | None = None
) -> AsyncIterator[Server]:
    """Serve plnt over HTTPS on a free loopback port, in this event loop (with `policy`
    instead of the standalone default policy when one is given)."""
    tokens = _token_file(tmp_path)
    policy_file = None
    if policy is not None:
        policy_file = tmp_path / "policy.yaml"
        policy_file.write_text(yaml.safe_dump(policy))
    settings = ServerSettings(
        etcd_endpoints=(etcd_endpoint.removeprefix("http://"),),
        etcd_prefix=f"/t-{uuid.uuid4().hex[:12]}",
        pki_dir=tmp_path / "pki",
        token_file=tokens,
        policy_file=policy_file,
        bookmark_interval_seconds=0.2,
    )
    application = app_module.build_app(settings)
    paths = pki_module.Pki.at(tmp_path / "pki")
    async with tls.serve_https(application, tls.server_context(paths)) as url:
        yield Server(url=url, pki=paths)


@pytest.fixture
async def server(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Server]:
    async with serving(etcd_endpoint, tmp_path / "server") as served:
        yield served


@pytest.fixture
async def server_namespace(server: Server) -> str:
    """A fresh namespace of `server`, created (standalone plnt refuses objects in a missing
    one); the client and CLI packages hand it to their tests as `namespace`."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    async with (
        tls.client_session(server.pki, cert=tls.admin(server.pki)) as session,
        session.post(f"{server.url}/api/v1/namespaces", json=body) as reply,
    ):
        assert reply.status == 201, await reply.text()
    return name


@pytest.fixture
def admin_kubeconfig(server: Server, tmp_path: Path, server_namespace: str) -> Path:
    return write_kubeconfig(tmp_path / "kube" / "config", server, namespace=server_namespace)


@pytest.fixture
async def client(admin_kubeconfig: Path) -> AsyncIterator[PlntClient]:
    async with PlntClient(kubeconfig.load(admin_kubeconfig)) as plnt:
        yield plnt


@pytest.fixture
async def runner_url() -> AsyncIterator[str]:
    """A real runner of examples/chat.workflow.yaml on the echo backend, on a loopback port."""
    settings = runner_settings.RunnerSettings(
        spec_path=EXAMPLES / "chat.workflow.yaml",
        backend=runner_settings.BackendConfig(type="echo"),
    )
    server = TestServer(runner_app.build_app(settings), host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


def ready_status(runner: str, *, revision: int = 1, digest: str = DIGEST) -> dict[str, Any]:
    """A status as the saga writes it once `revision` is promoted and served by `runner`."""
    return {
        "status": {
            "phase": "Ready",
            "revision": revision,
            "digest": digest,
            "backend": "echo",
            "replicas": 1,
            "readyReplicas": 1,
            "traffic": [
                {"revision": revision, "digest": digest, "weight": 100, "endpoints": [runner]}
            ],
            "history": [
                {
                    "revision": revision,
                    "digest": digest,
                    "ref": "oci://r.example/wf:1",
                    "backend": "echo",
                    "promotedAt": "2030-01-01T00:00:00Z",
                    "reason": "deploy",
                }
            ],
        }
    }
