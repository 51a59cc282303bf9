"""`RecordingDeploy`, an in-memory `DeployControl` standing in for the Temporal saga service,
and the in-process API server built with it.

The API-machinery tests run no Temporal: the stand-in records what the server asks the
saga (submits, aborts) and can play an unreachable Temporal (`unavailable`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from plnt.apiserver import app as app_module
from plnt.apiserver import pki as pki_module
from plnt.apiserver.settings import ServerSettings
from plnt.sagas.control import DeployUnavailable
from tests.support import tls
from tests.support.api_server import Api

DEADLINE_SECONDS = 20.0


class RecordingDeploy:
    """A DeployControl kept in memory, standing in for Temporal: it records submits and aborts.

    `unavailable` makes every call fail as an unreachable Temporal would; `in_flight`
    is what `abort` answers.
    """

    def __init__(self) -> None:
        self.submitted: list[dict[str, Any]] = []
        self.aborted: list[dict[str, Any]] = []
        self.unavailable = False
        self.in_flight = True
        self._changed = asyncio.Condition()

    async def submit(self, obj: dict[str, Any]) -> None:
        if self.unavailable:
            raise DeployUnavailable("Temporal at 127.0.0.1:1 refused the connection")
        async with self._changed:
            self.submitted.append(copy.deepcopy(obj))
            self._changed.notify_all()

    async def abort(self, obj: dict[str, Any]) -> bool:
        if self.unavailable:
            raise DeployUnavailable("Temporal at 127.0.0.1:1 refused the connection")
        self.aborted.append(copy.deepcopy(obj))
        return self.in_flight

    def names(self) -> list[str]:
        return [o["metadata"]["name"] for o in self.submitted]

    async def wait_for_submits(self, count: int) -> None:
        """Wait (with a deadline) until at least `count` submits were recorded."""
        async with asyncio.timeout(DEADLINE_SECONDS), self._changed:
            await self._changed.wait_for(lambda: len(self.submitted) >= count)


@contextlib.asynccontextmanager
async def serving_with_deploy(
    etcd_endpoint: str, tmp_path: Path, deploy: RecordingDeploy, *, prefix: str = ""
) -> AsyncIterator[Api]:
    """The in-process TLS server of `api_server.serving`, built with a DeployControl."""
    settings = ServerSettings(
        etcd_endpoints=(etcd_endpoint.removeprefix("http://"),),
        etcd_prefix=prefix or f"/t-{uuid.uuid4().hex[:12]}",
        pki_dir=tmp_path / "pki",
        bookmark_interval_seconds=0.2,
    )
    application = app_module.build_app(settings, deploy=deploy)
    paths = pki_module.Pki.at(tmp_path / "pki")
    async with (
        tls.serve_https(application, tls.server_context(paths)) as url,
        tls.client_session(paths, cert=tls.admin(paths)) as session,
    ):
        yield Api(url=url, session=session, pki=paths, settings=settings)
