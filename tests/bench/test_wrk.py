"""wrk's summary parsed, and its Lua script quoting: what the wrk rows are built from."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from aiohttp import web

from plnt.bench import wrk

SUMMARY = """Running 2s test @ https://127.0.0.1:1/x
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.10ms    1.01ms  20.00ms   90.00%
  Latency Distribution
     50%    1.95ms
     75%    2.40ms
     90%    3.00ms
     99%  850.00us
  8000 requests in 2.00s, 9.00MB read
  Socket errors: connect 0, read 1, write 0, timeout 2
  Non-2xx or 3xx responses: 7
Requests/sec:   4000.00
"""


def test_parse_counts_failures_apart_from_completed_requests() -> None:
    result = wrk.parse(SUMMARY)
    assert result.errors == 10
    assert result.requests == 7990
    assert result.seconds == 2.0
    assert result.p50_ms == pytest.approx(1.95)
    assert result.p99_ms == pytest.approx(0.85)
    assert result.rate == pytest.approx(3995.0)


def test_parse_without_a_summary_names_what_wrk_printed() -> None:
    with pytest.raises(wrk.WrkFailed, match="unable to connect"):
        wrk.parse("unable to connect to 127.0.0.1:1 Connection refused\n")


def test_lua_string_escapes_quotes_backslashes_and_newlines() -> None:
    assert wrk.lua_string('a"b\\c\nd') == '"a\\"b\\\\c\\010d"'


@pytest.mark.skipif(shutil.which("wrk") is None, reason=wrk.MISSING)
async def test_wrk_sends_the_scripted_method_body_and_header(tmp_path: Path) -> None:
    seen: list[tuple[str, bytes, str]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.method, await request.read(), request.headers["Authorization"]))
        return web.Response(status=201 if len(seen) % 2 else 500)

    app = web.Application()
    app.router.add_route("*", "/x", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        lua = wrk.script(method="POST", body=b'{"a": "b"}', headers={"Authorization": "Bearer t"})
        result = await wrk.run(
            f"http://127.0.0.1:{port}/x", connections=1, duration=1, lua=lua, workdir=tmp_path
        )
    finally:
        await runner.cleanup()
    assert seen and all(s == ("POST", b'{"a": "b"}', "Bearer t") for s in seen)
    # wrk counts answered requests: at its deadline the one connection may have one request
    # the server saw but whose answer wrk did not count. Of those answered, every second
    # was a 500.
    answered = result.requests + result.errors
    assert len(seen) - answered in (0, 1)
    assert result.errors == answered // 2


def test_numbered_script_without_its_marker_in_the_body_names_the_field() -> None:
    with pytest.raises(ValueError, match="body: holds no marker '@N@'"):
        wrk.numbered_script(body=b'{"q": "1"}', marker="@N@")


@pytest.mark.skipif(shutil.which("wrk") is None, reason=wrk.MISSING)
async def test_wrk_numbers_every_request_body_of_a_numbered_script(tmp_path: Path) -> None:
    seen: list[tuple[bytes, str]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((await request.read(), request.headers["Content-Type"]))
        return web.Response()

    app = web.Application()
    app.router.add_post("/x", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        lua = wrk.numbered_script(
            body=b'{"q": "n@N@"}', marker="@N@", headers={"Content-Type": "application/json"}
        )
        result = await wrk.run(
            f"http://127.0.0.1:{port}/x", connections=1, duration=1, lua=lua, workdir=tmp_path
        )
    finally:
        await runner.cleanup()
    # Every body differs (a server caching by body never answers from its cache); one
    # connection sends them in order, each numbered one more than the last (wrk builds
    # a request before its first send, so the first number seen may exceed 1). wrk
    # counts answered requests: at its deadline the one connection may have one request
    # sent and seen by the server but not yet answered, which wrk does not count.
    first = int(seen[0][0].split(b'"n')[1].split(b'"')[0])
    expected = [b'{"q": "n%d"}' % n for n in range(first, first + len(seen))]
    assert [body for body, _ in seen] == expected
    assert {kind for _, kind in seen} == {"application/json"}
    assert len(seen) - result.requests in (0, 1) and result.errors == 0
