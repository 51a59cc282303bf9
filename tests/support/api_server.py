"""An in-process plnt API server over real TLS on a real etcd, one keyspace per test.

`serving(etcd_endpoint, tmp_path, **overrides)` builds the real app (`build_app`) on a
fresh etcd prefix and serves it on a free loopback port; `Api` is a client of it with the
admin certificate, `Reply` what one call answered. `workflowrun(name)` is a valid body
(`plntbackend(name, **spec)` a PlntBackend's, posted to `BACKENDS`), `runner()` a real
runner process of the chat example on the echo backend: what the API-machinery tests
(and the UI and reliability tests that need the same server) use.
"""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from plnt.apiserver import app as app_module
from plnt.apiserver import pki as pki_module
from plnt.apiserver.settings import ServerSettings
from plnt.sagas.control import DeployControl
from tests.support import tls
from tests.support.examples import EXAMPLES
from tests.support.runners import runner_process

DIGEST = "sha256:" + "cd" * 32


BASE = "/apis/plnt.work/v1/namespaces/default/workflowruns"
BACKENDS = "/apis/plnt.work/v1/namespaces/default/plntbackends"


@contextlib.asynccontextmanager
async def runner() -> AsyncIterator[str]:
    """A real runner process serving the chat example with the echo backend."""
    async with runner_process(
        "--spec", str(EXAMPLES / "chat.workflow.yaml"), "--backend-type", "echo"
    ) as (_, url):
        yield url


def workflowrun(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}}
    body.update(spec)
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": body,
    }


def plntbackend(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": name},
        "spec": spec,
    }


@dataclass
class Reply:
    status: int
    headers: Any
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)


@dataclass
class Api:
    """A client of the server under test (admin certificate unless told otherwise)."""

    url: str
    session: aiohttp.ClientSession
    pki: pki_module.Pki
    settings: ServerSettings

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
    ) -> Reply:
        hdrs = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        payload: Any = io.BytesIO(data) if data is not None and len(data) > 1 << 20 else data
        async with self.session.request(
            method, self.url + path, data=payload, headers=hdrs, params=params
        ) as response:
            return Reply(response.status, response.headers, await response.text())


@contextlib.asynccontextmanager
async def serving(
    etcd_endpoint: str,
    tmp_path: Path,
    *,
    handler_cancellation: bool = True,
    deploy: DeployControl | None = None,
    **overrides: Any,
) -> AsyncIterator[Api]:
    """A server on a keyspace of its own (or `etcd_prefix=`'s, to serve it again after a
    restart), with `deploy` as its saga control when given."""
    options: dict[str, Any] = {
        "etcd_endpoints": (etcd_endpoint.removeprefix("http://"),),
        "etcd_prefix": f"/t-{uuid.uuid4().hex[:12]}",
        "pki_dir": tmp_path / "pki",
        "bookmark_interval_seconds": 0.2,
    }
    settings = ServerSettings(**{**options, **overrides})
    application = app_module.build_app(settings, deploy=deploy)
    paths = pki_module.Pki.at(tmp_path / "pki")
    async with (
        tls.serve_https(
            application, tls.server_context(paths), handler_cancellation=handler_cancellation
        ) as url,
        tls.client_session(paths, cert=tls.admin(paths)) as session,
    ):
        yield Api(url=url, session=session, pki=paths, settings=settings)
