"""A WorkflowRun's `Accepted` Event is written after the create is answered, and never lost.

The first server's recorder is stalled, as a process killed right after acknowledging
its creates leaves them: answered, with no Event written. The server started next on
the same keyspace records exactly one `Accepted` per run; recording again (a crash
between writing an Event and the next start, or two passes racing) adds none.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from plnt.apiserver import app as app_module
from plnt.apiserver import keys
from plnt.apiserver import pki as pki_module
from plnt.apiserver.settings import ServerSettings
from plnt.registry import events, workflowruns
from plnt.registry.changes import Change
from plnt.registry.store import ResourceStore
from tests.support import tls
from tests.support.api_server import BASE, Api, workflowrun
from tests.support.waiting import eventually

Found = dict[str, list[dict[str, Any]]]
EVENTS = "/api/v1/namespaces/default/events"
RUNS = ("a", "b", "c")


@contextlib.asynccontextmanager
async def serving(
    etcd_endpoint: str, tmp_path: Path, prefix: str
) -> AsyncIterator[tuple[Api, web.Application]]:
    """A server on `prefix` (served again by the next call with the same prefix)."""
    settings = ServerSettings(
        etcd_endpoints=(etcd_endpoint.removeprefix("http://"),),
        etcd_prefix=prefix,
        pki_dir=tmp_path / "pki",
    )
    application = app_module.build_app(settings)
    paths = pki_module.Pki.at(tmp_path / "pki")
    async with (
        tls.serve_https(application, tls.server_context(paths)) as url,
        tls.client_session(paths, cert=tls.admin(paths)) as session,
    ):
        yield Api(url=url, session=session, pki=paths, settings=settings), application


async def accepted(api: Api) -> Found:
    """The stored `Accepted` Events by the run they are about."""
    reply = await api.call("GET", EVENTS)
    assert reply.status == 200, reply.text
    found: Found = {}
    for event in reply.json["items"]:
        if event["reason"] == "Accepted":
            found.setdefault(event["involvedObject"]["name"], []).append(event)
    return found


async def test_runs_acknowledged_by_a_server_that_never_wrote_their_events_get_one_each(
    etcd_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = f"/t-{uuid.uuid4().hex[:12]}"
    with monkeypatch.context() as stalled:

        async def never_writes(self: events.EventRecorder) -> None:
            await asyncio.Event().wait()

        async def no_flush(self: events.EventRecorder) -> None:
            return None

        stalled.setattr(events.EventRecorder, "run", never_writes)
        stalled.setattr(events.EventRecorder, "flush", no_flush)
        async with serving(etcd_endpoint, tmp_path, prefix) as (api, _):
            for name in RUNS:
                created = await api.call("POST", BASE, body=workflowrun(name))
                assert created.status == 201, created.text
            # Answered, and no Event exists: it was to be written after the answer.
            assert await accepted(api) == {}

    async with serving(etcd_endpoint, tmp_path, prefix) as (api, application):

        async def all_recorded() -> Found:
            found = await accepted(api)
            return found if set(found) == set(RUNS) else {}

        found: Found = await eventually(all_recorded, within=20, what="an Accepted Event per run")
        assert {name: len(items) for name, items in found.items()} == dict.fromkeys(RUNS, 1)
        uids = {name: items[0]["involvedObject"]["uid"] for name, items in found.items()}
        for name in RUNS:
            run = await api.call("GET", f"{BASE}/{name}")
            assert uids[name] == run.json["metadata"]["uid"]
            assert found[name][0]["message"].startswith("generation 1 accepted: ")

        # Recording again finds nothing missing; recording a run's creation once more, as
        # a pass racing the first write would, is refused by the Event's name.
        recorder = application[keys.EVENT_RECORDER]
        stores: dict[tuple[str, str], ResourceStore] = application[keys.STORES]
        assert await recorder.record_missing_creation_events(stores) == 0
        run = (await api.call("GET", f"{BASE}/a")).json
        recorder.record_change(Change(None, run), workflowruns.DEFINITION.transitions)  # type: ignore[arg-type]
        await recorder.flush()
        again = await accepted(api)
        assert {name: len(items) for name, items in again.items()} == dict.fromkeys(RUNS, 1)

    # A third start finds every run recorded.
    async with serving(etcd_endpoint, tmp_path, prefix) as (api, application):
        recorder = application[keys.EVENT_RECORDER]
        stores = application[keys.STORES]
        assert await recorder.record_missing_creation_events(stores) == 0
        created = await api.call("POST", BASE, body=workflowrun("d"))
        assert created.status == 201, created.text

        async def d_recorded() -> Found:
            found = await accepted(api)
            return found if "d" in found else {}

        found = await eventually(d_recorded, within=20, what="the Accepted Event of d")
        assert {name: len(items) for name, items in found.items()} == dict.fromkeys((*RUNS, "d"), 1)
