"""Two worker processes of one server (`--workers 2`) answer as one: `/metrics`, a run's
invocation log (and its watch) and its shadow pairs.

Each worker is a real app in this process, on its own port, over real TLS, on the same
etcd keyspace and the same private worker directory; they reach each other only through
their Unix sockets there (`plnt.apiserver.peers`). Invocations go to real runner
processes (the echo backend), as in `test_invoke`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from plnt.apiserver.metrics import Metrics
from plnt.apiserver.peers import DirectoryNotPrivate, Peers, SocketPathTooLong, socket_path
from plnt.apiserver.workflowruns.traffic import InvocationLog, insert_by_time
from plnt.processes.apiprocesses import Slot
from tests.apiserver.conftest import BASE, Api, serving
from tests.apiserver.test_invoke import run_with_traffic, target
from tests.apiserver.test_shadow_traffic import shadowed
from tests.support.waiting import eventually

DEADLINE_SECONDS = 20.0


@pytest.fixture
def worker_dir() -> Iterator[Path]:
    """The server's private directory (0700), short enough for Unix socket paths."""
    directory = Path(tempfile.mkdtemp(prefix="plnt-w-", dir="/tmp"))
    directory.chmod(0o700)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Server:
    """The two workers of one server; either may be stopped and started again."""

    def __init__(self, etcd_endpoint: str, tmp_path: Path, directory: Path) -> None:
        self._options: dict[str, Any] = {
            "etcd_endpoint": etcd_endpoint,
            "tmp_path": tmp_path,
            "etcd_prefix": f"/t-{uuid.uuid4().hex[:12]}",
        }
        self._directory = directory
        self._stacks: dict[int, contextlib.AsyncExitStack] = {}
        self.api: dict[int, Api] = {}

    async def start(self, index: int) -> Api:
        stack = contextlib.AsyncExitStack()
        api = await stack.enter_async_context(
            serving(
                self._options["etcd_endpoint"],
                self._options["tmp_path"],
                etcd_prefix=self._options["etcd_prefix"],
                slot=Slot(index, 2, self._directory),
            )
        )
        self._stacks[index], self.api[index] = stack, api
        return api

    async def stop(self, index: int) -> None:
        del self.api[index]
        await self._stacks.pop(index).aclose()

    async def close(self) -> None:
        for index in list(self._stacks):
            await self.stop(index)


@pytest.fixture
async def server(etcd_endpoint: str, tmp_path: Path, worker_dir: Path) -> AsyncIterator[Server]:
    both = Server(etcd_endpoint, tmp_path, worker_dir)
    try:
        await both.start(0)
        await both.start(1)
        yield both
    finally:
        await both.close()


async def until(check: Callable[[], Awaitable[Any]], *, what: str) -> Any:
    """`check()`'s first truthy answer, polled until the deadline."""
    return await eventually(check, within=DEADLINE_SECONDS, what=what)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(api: Api) -> tuple[str, Samples]:
    reply = await api.call("GET", "/metrics")
    assert reply.status == 200, reply.text
    samples: Samples = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return reply.text, samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def subscribed(server: Server) -> None:
    """Until each running worker reads both streams of its sibling."""

    async def reads(index: int) -> bool:
        _, samples = await scrape(server.api[index])
        return all(
            value(samples, "plnt_apiserver_worker_subscriptions", stream=stream, worker=str(index))
            == 1
            for stream in ("invocationlog", "shadow")
        )

    for index in server.api:
        await until(
            lambda index=index: reads(index),  # type: ignore[misc]
            what=f"worker {index} to read its sibling's streams",
        )


def requests_by_worker(samples: Samples) -> set[str]:
    return {
        dict(labels)["worker"]
        for (name, labels) in samples
        if name == "plnt_apiserver_requests_total"
    }


async def test_either_worker_answers_metrics_for_both_labelled_by_worker(server: Server) -> None:
    for api in server.api.values():
        assert (await api.call("GET", "/version")).status == 200
    for index, api in server.api.items():
        text, samples = await scrape(api)
        assert requests_by_worker(samples) == {"0", "1"}, f"worker {index}"
        version = {"code": "200", "group": "", "resource": "", "subresource": "", "verb": "get"}
        for worker in ("0", "1"):
            count = value(samples, "plnt_apiserver_requests_total", **version, worker=worker)
            assert count is not None and count >= 1
        headers = [line for line in text.splitlines() if line.startswith("# ")]
        assert len(headers) == len(set(headers)), "HELP and TYPE once per family"
        assert text.count("# TYPE plnt_apiserver_requests_total counter") == 1
        assert all('worker="' in line for line in text.splitlines() if not line.startswith("#"))


async def test_a_sibling_gone_leaves_its_series_out_and_is_counted(server: Server) -> None:
    assert (await server.api[0].call("GET", "/version")).status == 200
    await server.stop(1)
    _, samples = await scrape(server.api[0])
    assert requests_by_worker(samples) == {"0"}
    errors = value(samples, "plnt_apiserver_worker_scrape_errors_total", sibling="1", worker="0")
    assert errors is not None and errors >= 1


async def log_of(api: Api, name: str) -> list[dict[str, Any]] | None:
    reply = await api.call("GET", f"{BASE}/{name}/invocationlog")
    if reply.status != 200:  # the run not yet in this worker's watch cache
        return None
    items: list[dict[str, Any]] = reply.json["items"]
    return items


async def has_run(api: Api, name: str) -> bool:
    return (await api.call("GET", f"{BASE}/{name}")).status == 200


async def invoke(api: Api, name: str, question: str) -> None:
    reply = await api.call("POST", f"{BASE}/{name}/invoke", body={"inputs": {"question": question}})
    assert reply.status == 200, reply.text


async def logged(api: Api, name: str, count: int) -> list[dict[str, Any]]:
    async def enough() -> list[dict[str, Any]] | None:
        items = await log_of(api, name)
        return items if items is not None and len(items) >= count else None

    found: list[dict[str, Any]] = await until(enough, what=f"{count} entries in the log")
    return found


async def test_an_invocation_through_one_worker_is_in_the_others_log_and_watch(
    server: Server, runner_a: str
) -> None:
    await subscribed(server)
    await run_with_traffic(server.api[1], "w", target(1, 100, runner_a))
    await until(lambda: has_run(server.api[0], "w"), what="the run on worker 0")
    other = server.api[0]
    async with other.session.get(
        f"{other.url}{BASE}/w/invocationlog", params={"watch": "true"}
    ) as watch:
        assert watch.status == 200
        await invoke(server.api[1], "w", "through worker 1")
        async with asyncio.timeout(DEADLINE_SECONDS):
            event = json.loads(await watch.content.readline())
    assert event["type"] == "ADDED"
    assert (event["object"]["revision"], event["object"]["endpoint"]) == (1, runner_a)
    [entry] = await logged(other, "w", 1)
    assert entry == event["object"]
    assert await log_of(server.api[1], "w") == [entry]


async def test_a_restarted_sibling_is_read_again_and_reads_again(
    server: Server, runner_a: str
) -> None:
    await subscribed(server)
    await run_with_traffic(server.api[0], "r", target(1, 100, runner_a))
    await server.stop(1)
    await server.start(1)
    await subscribed(server)
    await invoke(server.api[1], "r", "after the restart, through worker 1")
    await invoke(server.api[0], "r", "after the restart, through worker 0")
    first = await logged(server.api[0], "r", 2)
    second = await logged(server.api[1], "r", 2)
    assert sorted(json.dumps(e, sort_keys=True) for e in first) == sorted(
        json.dumps(e, sort_keys=True) for e in second
    )


async def test_shadow_pairs_made_on_one_worker_are_read_on_the_other(
    server: Server, runner_a: str, runner_b: str
) -> None:
    await subscribed(server)
    await run_with_traffic(server.api[1], "s", target(1, 100, runner_a), shadowed(2, runner_b))
    for n in range(3):
        await invoke(server.api[1], "s", f"q{n}")

    async def three(api: Api) -> dict[str, Any] | None:
        reply = await api.call("GET", f"{BASE}/s/shadow", params={"revision": "2"})
        return reply.json if reply.status == 200 and len(reply.json["items"]) == 3 else None

    made = await until(lambda: three(server.api[1]), what="three pairs on worker 1")
    read = await until(lambda: three(server.api[0]), what="three pairs on worker 0")
    assert {p["id"] for p in read["items"]} == {p["id"] for p in made["items"]}
    assert {p["inputs"]["question"] for p in read["items"]} == {"q0", "q1", "q2"}
    assert read["dropped"] == made["dropped"] == 0


def test_a_late_sibling_entry_takes_its_place_by_time() -> None:
    log = InvocationLog(size=3)
    log.record("ns", "r", {"time": "2026-01-01T00:00:02Z", "n": 2})
    log.receive("ns", "r", {"time": "2026-01-01T00:00:01Z", "n": 1})
    log.receive("ns", "r", {"time": "2026-01-01T00:00:02Z", "n": 3})
    assert [e["n"] for e in log.entries("ns", "r")] == [1, 2, 3]
    log.receive("ns", "r", {"time": "2026-01-01T00:00:00Z", "n": 0})  # older than all kept
    assert [e["n"] for e in log.entries("ns", "r")] == [1, 2, 3]
    entries: deque[dict[str, Any]] = deque([{"time": "b"}, {"time": "c"}], maxlen=2)
    assert insert_by_time(entries, {"time": "bb"})
    assert [e["time"] for e in entries] == ["bb", "c"]


async def test_a_worker_directory_others_may_enter_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "open"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    peers = Peers(Slot(0, 2, directory), Metrics())
    with pytest.raises(DirectoryNotPrivate):
        await anext(peers.context(web.Application()))
    assert not socket_path(directory, 0).exists()


def test_a_worker_directory_too_deep_for_a_socket_path_is_refused() -> None:
    with pytest.raises(SocketPathTooLong):
        Peers(Slot(0, 2, Path("/tmp") / ("d" * 100)), Metrics())


async def test_a_sibling_behind_by_the_backlog_loses_the_next_item_counted(
    worker_dir: Path,
) -> None:
    received: list[Any] = []
    own = Metrics()
    first = Peers(Slot(0, 2, worker_dir), own, backlog=2)
    second = Peers(Slot(1, 2, worker_dir), Metrics(), backlog=2)
    published = first.stream("items", lambda item: None)
    second.stream("items", received.append)
    async with contextlib.AsyncExitStack() as stack:
        for peers in (first, second):
            running = peers.context(web.Application())
            await anext(running)
            stack.push_async_callback(anext, running, None)
        await until(lambda: _true(published.subscribers == 1), what="the sibling reading")
        for n in range(3):  # no await between: the sibling cannot read any of them yet
            published.publish({"n": n})
        dropped = own.registry.get_sample_value(
            "plnt_apiserver_worker_forward_dropped_total", {"stream": "items"}
        )
        assert dropped == 1
        await until(lambda: _true(len(received) == 2), what="the items queued in time")
        assert received == [{"n": 0}, {"n": 1}]


async def _true(condition: bool) -> bool:
    return condition
