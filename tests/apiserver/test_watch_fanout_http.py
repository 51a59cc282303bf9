"""Many watchers of one collection over HTTPS while writes burst: each sees every event once.

The watch cache wakes its watchers in paced rounds and a watcher's events go out
several per write (`plnt.storage.fanout_pacing`); plain-JSON lines are shared between
watchers. These tests check, at the HTTP level, that none of that changes what a
client reads: the same events in revision order for every plain watcher (byte for
byte), the filtered and Table watchers their own view, DELETED at the delete's
revision, and bookmarks never ahead of an event not yet sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp

from tests.support.api_server import BASE, Api, workflowrun

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
PLAIN_WATCHERS = 8
CREATES = 30


@contextlib.asynccontextmanager
async def watching(
    api: Api, *params: dict[str, str], headers: dict[str, str] | None = None
) -> AsyncIterator[list[aiohttp.ClientResponse]]:
    """One open watch per `params`, closed when the block ends."""
    async with contextlib.AsyncExitStack() as stack:
        streams = []
        for p in params:
            response = await stack.enter_async_context(
                api.session.get(api.url + BASE, params=p, headers=headers or {})
            )
            assert response.status == 200
            streams.append(response)
        yield streams


async def read_lines(
    response: aiohttp.ClientResponse,
    until: Callable[[list[bytes]], bool],
    *,
    deadline: float = 20,
) -> list[bytes]:
    """Lines until `until(lines)` holds (or the stream ends), failing after `deadline` s."""
    lines: list[bytes] = []
    async with asyncio.timeout(deadline):
        while not until(lines):
            line = await response.content.readline()
            if not line:
                break
            lines.append(line)
    return lines


def revision(event: dict[str, Any]) -> int:
    return int(event["object"]["metadata"]["resourceVersion"])


async def test_every_watcher_gets_every_event_once_in_order_through_a_burst(api: Api) -> None:
    start = (await api.call("GET", BASE)).json["metadata"]["resourceVersion"]
    watch = {"watch": "true", "resourceVersion": start}
    labelled = {**watch, "labelSelector": "tier=gold"}
    bookmarks = {**watch, "allowWatchBookmarks": "true"}
    async with (
        watching(api, *[watch] * PLAIN_WATCHERS) as plain,
        watching(api, watch, headers={"Accept": TABLE}) as (table,),
        watching(api, labelled, bookmarks) as (gold, marked),
    ):
        # The burst: concurrent creates (every third labelled), then updates that move
        # two objects into the selector and one out, then deletes.
        names = [f"burst-{i:02d}" for i in range(CREATES)]
        bodies = [workflowrun(n) for n in names]
        for i, body in enumerate(bodies):
            if i % 3 == 0:
                body["metadata"]["labels"] = {"tier": "gold"}
        replies = await asyncio.gather(*(api.call("POST", BASE, body=b) for b in bodies))
        assert all(r.status == 201 for r in replies)
        relabel = {"burst-01": "gold", "burst-02": "gold", "burst-03": "silver"}
        for name, tier in relabel.items():
            reply = await api.call(
                "PATCH",
                f"{BASE}/{name}",
                data=json.dumps({"metadata": {"labels": {"tier": tier}}}).encode(),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert reply.status == 200, reply.text
        deleted = names[-5:]
        for name in deleted:
            assert (await api.call("DELETE", f"{BASE}/{name}")).status == 200
        total = CREATES + len(relabel) + len(deleted)
        plain_lines = await asyncio.gather(
            *(read_lines(s, lambda got: len(got) >= total) for s in plain)
        )
        table_lines = await read_lines(table, lambda got: len(got) >= total)
        # gold: 10 labelled creates, 2 move in (ADDED), 1 moves out (DELETED), and the
        # deletes of the labelled among the last five (burst-27).
        gold_lines = await read_lines(gold, lambda got: len(got) >= 10 + 2 + 1 + 1)
        # ... and one bookmark after them (the stream is idle once they are sent).
        marked_lines = await read_lines(
            marked,
            lambda got: (
                sum(b'"type":"BOOKMARK"' not in line for line in got) >= total
                and b'"type":"BOOKMARK"' in got[-1]
            ),
        )

    # Plain watchers: identical bytes, revisions strictly rising.
    assert all(lines == plain_lines[0] for lines in plain_lines)
    events = [json.loads(line) for line in plain_lines[0]]
    assert [e["type"] for e in events] == ["ADDED"] * CREATES + ["MODIFIED"] * 3 + ["DELETED"] * 5
    revisions = [revision(e) for e in events]
    assert revisions == sorted(set(revisions))  # in order, no duplicates
    assert {e["object"]["metadata"]["name"] for e in events[:CREATES]} == set(names)
    # A DELETED event is the last state at the delete's own revision.
    last_write = {e["object"]["metadata"]["name"]: revision(e) for e in events[:-5]}
    for event in events[-5:]:
        assert revision(event) > last_write[event["object"]["metadata"]["name"]]

    # Table: the same events as rows, columns only on the first.
    tables = [json.loads(line) for line in table_lines]
    assert [t["type"] for t in tables] == [e["type"] for e in events]
    assert tables[0]["object"]["columnDefinitions"]
    assert all(t["object"]["columnDefinitions"] == [] for t in tables[1:])
    assert [t["object"]["rows"][0]["cells"][0] for t in tables] == [
        e["object"]["metadata"]["name"] for e in events
    ]

    # The selector's own view: objects entering it are ADDED, leaving it DELETED.
    gold_events = [
        (e["type"], e["object"]["metadata"]["name"]) for e in map(json.loads, gold_lines)
    ]
    labelled_names = {n for i, n in enumerate(names) if i % 3 == 0}
    assert {n for _, n in gold_events[:10]} == labelled_names
    assert gold_events[10:] == [
        ("ADDED", "burst-01"),
        ("ADDED", "burst-02"),
        ("DELETED", "burst-03"),
        ("DELETED", "burst-27"),
    ]

    # Bookmarks: the same events in order; a bookmark never claims a revision whose
    # event has not been sent before it.
    marked_events = [json.loads(line) for line in marked_lines]
    assert [e for e in marked_events if e["type"] != "BOOKMARK"] == events
    sent = 0
    for event in marked_events:
        if event["type"] == "BOOKMARK":
            covered = revision(event)
            assert all(r <= sent for r in revisions if r <= covered)
        else:
            sent = revision(event)
