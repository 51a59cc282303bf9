"""`GET …/invocationlog?watch=true` over real HTTP: the invocation log, followed.

The server runs in this process (so a test can read how many watchers the log feeds and
make the backlog bound small); the invocations go to a real runner process with the echo
backend, the saga's part played by writing `status.traffic`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from plnt.apiserver import app as app_module
from plnt.apiserver import pki as pki_module
from plnt.apiserver.settings import ServerSettings
from plnt.apiserver.workflowruns import keys
from plnt.apiserver.workflowruns.traffic import InvocationLog
from tests.support import tls
from tests.support.api_server import BASE, Api, runner, workflowrun
from tests.support.traffic import invoke, run_with_traffic, target
from tests.support.waiting import eventually

DEADLINE_SECONDS = 20.0
NAMESPACE = "default"


@dataclass
class Served:
    api: Api
    app: web.Application

    @property
    def log(self) -> InvocationLog:
        return self.app[keys.INVOKER].log

    def watchers(self, name: str) -> int:
        return self.log.followers(NAMESPACE, name)


@pytest.fixture
async def served(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Served]:
    """The in-process TLS server of `conftest.serving`, with its application at hand."""
    settings = ServerSettings(
        etcd_endpoints=(etcd_endpoint.removeprefix("http://"),),
        etcd_prefix=f"/t-{uuid.uuid4().hex[:12]}",
        pki_dir=tmp_path / "pki",
        bookmark_interval_seconds=0.2,
    )
    application = app_module.build_app(settings)
    paths = pki_module.Pki.at(tmp_path / "pki")
    async with (
        tls.serve_https(application, tls.server_context(paths)) as url,
        tls.client_session(paths, cert=tls.admin(paths)) as session,
    ):
        yield Served(Api(url=url, session=session, pki=paths, settings=settings), application)


@contextlib.asynccontextmanager
async def watching(api: Api, name: str, **query: str) -> AsyncIterator[aiohttp.ClientResponse]:
    """The open watch response (headers received: the server follows the log by then)."""
    params = {"watch": "true", **query}
    async with api.session.get(f"{api.url}{BASE}/{name}/invocationlog", params=params) as response:
        assert response.status == 200, await response.text()
        yield response


async def next_event(response: aiohttp.ClientResponse) -> dict[str, Any] | None:
    """The next watch event, or None at the end of the stream."""
    async with asyncio.timeout(DEADLINE_SECONDS):
        line = await response.content.readline()
    if not line:
        return None
    event: dict[str, Any] = json.loads(line)
    return event


async def test_a_watch_sends_the_log_then_each_invocation_as_it_ends_and_forgets_a_gone_client(
    served: Served,
) -> None:
    api = served.api
    async with runner() as url:
        await run_with_traffic(api, "w", target(3, 100, url))
        for question in ("a", "b"):
            assert (await invoke(api, "w", question)).status == 200
        listed = (await api.call("GET", f"{BASE}/w/invocationlog")).json["items"]
        assert len(listed) == 2
        async with watching(api, "w") as response:
            assert response.headers["Content-Type"].startswith("application/json")
            assert served.watchers("w") == 1
            # kube's watch shape: {"type", "object"} per line, the held entries first.
            held = [await next_event(response) for _ in listed]
            assert held == [{"type": "ADDED", "object": entry} for entry in listed]

            answer = await invoke(api, "w", "a")  # a step-cache hit this time
            assert answer.status == 200
            event = await next_event(response)
            assert event is not None and event["type"] == "ADDED"
            entry = event["object"]
            assert (entry["revision"], entry["endpoint"], entry["status"]) == (3, url, 200)
            assert entry["cache"] == "hit" and entry["durationMs"] >= 0
            assert set(entry["timingsMs"]) >= {"apiserver", "runner"}
            latest = (await api.call("GET", f"{BASE}/w/invocationlog")).json["items"][-1]
            assert entry == latest  # what the list shows, at the moment it shows it
        # The client went away: the watch's handler ends and the log feeds it no more.
        await eventually(
            lambda: served.watchers("w") == 0, within=DEADLINE_SECONDS, what="the watcher gone"
        )
        assert (await invoke(api, "w", "c")).status == 200
        assert served.watchers("w") == 0


async def test_timeout_seconds_ends_the_watch_and_removes_its_follower(served: Served) -> None:
    api = served.api
    assert (await api.call("POST", BASE, body=workflowrun("quiet"))).status == 201
    async with watching(api, "quiet", timeoutSeconds="1") as response:
        assert served.watchers("quiet") == 1
        assert await next_event(response) is None  # no entries, then the end at 1 s
    assert served.watchers("quiet") == 0
    bad = await api.call("GET", f"{BASE}/quiet/invocationlog?watch=true&timeoutSeconds=soon")
    assert bad.status == 400 and "timeoutSeconds" in bad.json["message"]
    missing = await api.call("GET", f"{BASE}/nope/invocationlog?watch=true")
    assert missing.status == 404


async def test_a_watcher_further_behind_than_the_bound_gets_what_it_had_then_its_end(
    served: Served,
) -> None:
    """Five entries recorded while the watcher's handler cannot run: what a burst of
    invocations ending while its client reads slowly looks like to the log. Only the
    bound (here 3) is ever queued for it; it is ended, not fed further."""
    api = served.api
    assert (await api.call("POST", BASE, body=workflowrun("busy"))).status == 201
    served.log.follower_backlog = 3
    burst = [{"time": f"t{i}", "revision": 1, "status": 200} for i in range(5)]
    async with watching(api, "busy") as response:
        assert served.watchers("busy") == 1
        for entry in burst:  # no await between them: the handler does not run
            served.log.record(NAMESPACE, "busy", entry)
        assert served.watchers("busy") == 0  # dropped at once, whatever its client does
        received = []
        while (event := await next_event(response)) is not None:
            received.append(event)
    assert received == [{"type": "ADDED", "object": entry} for entry in burst[:3]]
    # The log itself lost nothing: a new watch (or the list) starts from all of it.
    async with watching(api, "busy", timeoutSeconds="1") as again:
        fresh = []
        while (event := await next_event(again)) is not None:
            fresh.append(event["object"])
    assert fresh == burst


DEPRECATION = (
    '299 - "plnt.work/v1 WorkflowRun subresource invocations is deprecated; use'
    ' invocationlog (invocations now names the Invocation kind)"'
)


async def test_the_log_answers_under_its_old_name_too_with_kubes_deprecation_warning(
    api: Api,
) -> None:
    await api.call("POST", BASE, body=workflowrun("w"))
    new = await api.call("GET", f"{BASE}/w/invocationlog")
    assert new.status == 200 and new.json["kind"] == "WorkflowRunInvocationList"
    assert "Warning" not in new.headers
    old = await api.call("GET", f"{BASE}/w/invocations")
    assert old.status == 200 and old.json == new.json
    assert old.headers.getall("Warning") == [DEPRECATION]
    params = {"watch": "true", "timeoutSeconds": "1"}
    async with api.session.get(f"{api.url}{BASE}/w/invocations", params=params) as watched:
        assert watched.status == 200
        assert watched.headers.getall("Warning") == [DEPRECATION]
        await watched.read()
