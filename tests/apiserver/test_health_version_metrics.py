"""What operators and kubectl read about the server itself: `/livez`, `/healthz` and
`/readyz` (verbose lists and `exclude`), the `/version` document, and the open-watches
gauge and request counter of `/metrics`.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.waiting import eventually


async def test_health_endpoints_list_checks_when_verbose_and_honour_exclude(api: Api) -> None:
    plain = await api.call("GET", "/livez")
    assert plain.text == "ok" and plain.headers["Content-Type"] == "text/plain; charset=utf-8"
    verbose = await api.call("GET", "/healthz?verbose")
    assert verbose.text.splitlines() == [
        "[+]ping ok",
        "[+]etcd ok",
        "[+]watch-cache ok",
        "healthz check passed",
    ]
    excluded = await api.call("GET", "/readyz?verbose&exclude=etcd")
    assert "[+]etcd excluded: ok" in excluded.text.splitlines()


async def test_version_is_semver_like_and_matches_major_and_minor(api: Api) -> None:
    info = (await api.call("GET", "/version")).json
    found = re.fullmatch(r"v(\d+)\.(\d+)\.\d+(-[0-9A-Za-z.]+)?", info["gitVersion"])
    assert found is not None, info
    assert (info["major"], info["minor"]) == (found.group(1), found.group(2))
    expected = {"major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate"}
    assert expected | {"goVersion", "compiler", "platform"} == set(info)


def _metric(text: str, name: str, labels: str) -> float:
    found = re.search(rf"^{name}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_open_watches_gauge_moves_with_a_watch_and_a_closed_watch_counts_as_200(
    api: Api,
) -> None:
    gauge = 'resource="workflowruns"'
    ended = 'code="200",group="plnt.work",resource="workflowruns",subresource="",verb="watch"'

    async def metrics() -> str:
        return (await api.call("GET", "/metrics")).text

    assert _metric(await metrics(), "plnt_apiserver_open_watches", gauge) == 0
    async with api.session.get(api.url + BASE, params={"watch": "true"}) as stream:
        assert stream.status == 200
        assert _metric(await metrics(), "plnt_apiserver_open_watches", gauge) == 1

    async def closed_and_counted() -> str | None:
        # The server notices the disconnect on its own, a moment after the client leaves.
        text = await metrics()
        closed = _metric(text, "plnt_apiserver_open_watches", gauge) == 0
        counted = _metric(text, "plnt_apiserver_requests_total", ended) >= 1
        return text if closed and counted else None

    text = await eventually(
        closed_and_counted, within=10, what="the closed watch to leave the gauge and count as 200"
    )
    assert 'verb="watch"} ' not in "".join(
        line for line in text.splitlines() if 'code="500"' in line
    )


async def test_a_client_hanging_up_on_a_busy_watch_is_no_error_in_the_log_or_the_metrics(
    etcd_endpoint: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`kubectl wait` closes its watch as soon as the condition holds, often while events
    are still being written to it: the next write meets a reset connection. That is how
    watches end, so nothing is logged above debug and the request counts as a 200. Under
    `plnt serve` the handler is not cancelled when its client goes away, so the failed
    write is what ends the watch."""
    async with serving(etcd_endpoint, tmp_path, handler_cancellation=False) as api:
        await _hang_up_on_a_busy_watch(api, caplog)


async def _hang_up_on_a_busy_watch(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    ended = 'code="200",group="plnt.work",resource="workflowruns",subresource="",verb="watch"'
    failed = 'code="500",group="plnt.work",resource="workflowruns",subresource="",verb="watch"'
    names = iter(f"hangup-{n}" for n in range(10_000))

    async def metrics() -> str:
        return (await api.call("GET", "/metrics")).text

    before = _metric(await metrics(), "plnt_apiserver_requests_total", ended)
    async with api.session.get(api.url + BASE, params={"watch": "true"}) as stream:
        assert stream.status == 200
        created = await api.call("POST", BASE, body=workflowrun(next(names)))
        assert created.status == 201
        await stream.content.readline()
        stream.connection.transport.abort()  # a hang-up, not a polite close

    async def ended_after_writes() -> bool:
        # Events keep coming, so the server writes to the dead connection.
        assert (await api.call("POST", BASE, body=workflowrun(next(names)))).status == 201
        return _metric(await metrics(), "plnt_apiserver_requests_total", ended) > before

    with caplog.at_level(logging.DEBUG, logger="plnt"):
        await eventually(ended_after_writes, within=10, what="the watch to end as a 200")
    assert _metric(await metrics(), "plnt_apiserver_requests_total", failed) == 0
    loud = [r for r in caplog.records if r.levelno > logging.DEBUG and r.name.startswith("plnt")]
    assert not loud, [r.getMessage() for r in loud]
