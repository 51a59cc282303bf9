"""Max-in-flight: separate read-only and mutating budgets, kube's 429 Status with
Retry-After, long-running requests and health probes exempt, system:masters never
refused, and no slot leaked by an error or a cancellation — first on the limiter and
the middleware alone, then over real HTTPS with a request holding a slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import MultiDict

from plnt.api import errors
from plnt.apiserver import authn, inflight, keys, longrunning, middleware, requestinfo, responses
from plnt.apiserver.app import STANDALONE_RESOURCES
from plnt.apiserver.inflight import InFlightLimiter, RequestKind
from plnt.apiserver.metrics import Metrics
from plnt.apiserver.settings import ServingLimits
from tests.support import tls
from tests.support.api_server import BASE, Api, serving, workflowrun
from tests.support.waiting import eventually

READ = RequestKind.READ_ONLY
WRITE = RequestKind.MUTATING
KUBE_MESSAGE = "the server has received too many requests and has asked us to try again later"
RUNS = "/apis/plnt.work/v1/namespaces/ns/workflowruns"

# --- the limiter ------------------------------------------------------------------------


def test_read_only_and_mutating_requests_have_budgets_of_their_own() -> None:
    limiter = InFlightLimiter(read_only=2, mutating=1)
    with limiter.admit(READ), limiter.admit(READ):
        with pytest.raises(errors.TooManyRequests), limiter.admit(READ):
            pass
        with limiter.admit(WRITE):
            assert (limiter.in_flight(READ), limiter.in_flight(WRITE)) == (2, 1)
            with pytest.raises(errors.TooManyRequests), limiter.admit(WRITE):
                pass
    assert (limiter.rejected(READ), limiter.rejected(WRITE)) == (1, 1)
    assert (limiter.in_flight(READ), limiter.in_flight(WRITE)) == (0, 0)


@pytest.mark.parametrize(
    ("verb", "kind"),
    [
        ("get", READ),
        ("list", READ),
        ("watch", READ),
        ("create", WRITE),
        ("update", WRITE),
        ("patch", WRITE),
        ("delete", WRITE),
        ("deletecollection", WRITE),
        ("head", WRITE),  # kube's read-only set is get, list and watch only
        ("post", WRITE),
    ],
)
def test_verbs_fall_into_kubes_two_kinds(verb: str, kind: RequestKind) -> None:
    assert inflight.kind_of(verb) is kind


def test_the_refusal_is_kubes_429_status_with_retry_after() -> None:
    limiter = InFlightLimiter(read_only=1, mutating=1)
    with limiter.admit(READ), pytest.raises(errors.TooManyRequests) as refused, limiter.admit(READ):
        pass
    response = responses.status_response(refused.value)
    assert response.status == 429
    assert response.headers["Retry-After"] == "1"
    assert refused.value.to_status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": KUBE_MESSAGE,
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": 1},
        "code": 429,
    }


def test_system_masters_are_served_without_a_slot_when_the_limit_is_reached() -> None:
    limiter = InFlightLimiter(read_only=1, mutating=1)
    with limiter.admit(WRITE):
        with limiter.admit(WRITE, privileged=True):
            assert limiter.in_flight(WRITE) == 1
        assert limiter.rejected(WRITE) == 0
    with limiter.admit(WRITE, privileged=True):  # a free slot is taken, as in kube
        assert limiter.in_flight(WRITE) == 1


def test_a_limit_of_zero_means_no_limit() -> None:
    limiter = InFlightLimiter(read_only=0, mutating=1)
    with limiter.admit(READ), limiter.admit(READ), limiter.admit(READ):
        assert limiter.rejected(READ) == 0


def test_an_error_inside_the_request_frees_its_slot() -> None:
    limiter = InFlightLimiter(read_only=1, mutating=1)
    with pytest.raises(RuntimeError), limiter.admit(WRITE):
        raise RuntimeError("handler failed")
    with limiter.admit(WRITE):  # the slot is free again
        assert limiter.in_flight(WRITE) == 1


async def test_a_cancelled_request_frees_its_slot() -> None:
    limiter = InFlightLimiter(read_only=1, mutating=1)
    entered, never = asyncio.Event(), asyncio.Event()

    async def held() -> None:
        with limiter.admit(READ):
            entered.set()
            await never.wait()

    task = asyncio.create_task(held())
    await entered.wait()
    assert limiter.in_flight(READ) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert limiter.in_flight(READ) == 0


def test_metrics_show_slots_limits_refusals_and_long_running_requests() -> None:
    limiter = InFlightLimiter(read_only=3, mutating=1)
    metrics = Metrics(in_flight=limiter)
    with limiter.admit(READ), limiter.admit(WRITE), limiter.running_long():
        with pytest.raises(errors.TooManyRequests), limiter.admit(WRITE):
            pass
        text = metrics.exposition().decode()
    expected = {
        'plnt_apiserver_current_inflight_requests{request_kind="readOnly"}': 1.0,
        'plnt_apiserver_current_inflight_requests{request_kind="mutating"}': 1.0,
        'plnt_apiserver_inflight_limit{request_kind="readOnly"}': 3.0,
        'plnt_apiserver_dropped_requests_total{request_kind="mutating"}': 1.0,
        'plnt_apiserver_dropped_requests_total{request_kind="readOnly"}': 0.0,
        "plnt_apiserver_longrunning_requests": 1.0,
    }
    for sample, value in expected.items():
        assert f"{sample} {value}\n" in text, sample


# --- the long-running predicate ---------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "query", "long"),
    [
        ("GET", RUNS, {"watch": "true"}, True),
        ("GET", RUNS, {"watch": "1"}, True),
        ("GET", "/apis/plnt.work/v1/workflowruns", {"watch": "true"}, True),
        ("POST", f"{RUNS}/r/invoke", {}, True),
        ("POST", f"{RUNS}/r/invoke", {"stream": "true"}, True),
        ("POST", f"{RUNS}/r/proxy/v1/chat/completions", {}, True),
        ("GET", f"{RUNS}/r/proxy/v1/models", {}, True),
        ("POST", f"{RUNS}/r/bench", {}, True),
        ("GET", f"{RUNS}/r/invocationlog", {"watch": "true"}, True),
        ("GET", f"{RUNS}/r/invocationlog", {}, False),
        ("GET", f"{RUNS}/r/invocationlog", {"watch": "false"}, False),
        ("GET", f"{RUNS}/r/invocations", {"watch": "true"}, True),  # the log's old name
        ("GET", f"{RUNS}/r/invocations", {}, False),
        ("GET", "/apis/plnt.work/v1/namespaces/ns/invocations/i", {}, False),  # the kind
        ("GET", RUNS, {}, False),
        ("GET", RUNS, {"watch": "false"}, False),
        ("GET", f"{RUNS}/r", {"watch": "true"}, False),  # a get, as kube reads it
        ("POST", RUNS, {}, False),
        ("PUT", f"{RUNS}/r/scale", {}, False),
        ("POST", f"{RUNS}/r/rollback", {}, False),
        ("GET", f"{RUNS}/r/status/extra", {}, False),
        ("GET", "/apis", {}, False),
        ("GET", "/metrics", {}, False),
    ],
)
def test_watches_invokes_proxies_and_benchmarks_are_long_running(
    method: str, path: str, query: dict[str, str], long: bool
) -> None:
    params = MultiDict(query)
    info = requestinfo.parse(method, path, params)
    assert longrunning.LongRunning(STANDALONE_RESOURCES).is_long_running(info, params) is long


def test_a_proxy_path_is_the_proxy_subresource_and_other_long_tails_are_no_resource() -> None:
    proxy = requestinfo.parse("POST", f"{RUNS}/r/proxy/v1/chat/completions", MultiDict())
    assert (proxy.is_resource_request, proxy.resource, proxy.name, proxy.subresource) == (
        True,
        "workflowruns",
        "r",
        "proxy",
    )
    assert not requestinfo.parse("GET", f"{RUNS}/r/status/extra", MultiDict()).is_resource_request


# --- the middleware ---------------------------------------------------------------------

VIEWER = authn.UserInfo(name="v", groups=("plnt:viewers", authn.SYSTEM_AUTHENTICATED))
ADMIN = authn.UserInfo(name="a", groups=(authn.SYSTEM_MASTERS, authn.SYSTEM_AUTHENTICATED))


def _request(method: str, path: str, user: authn.UserInfo) -> web.Request:
    request = make_mocked_request(method, path)
    request[keys.REQUEST_INFO] = requestinfo.parse(method, request.path, request.query)
    request[keys.USER] = user
    return request


async def _ok(request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok")


async def test_the_middleware_exempts_long_running_requests_and_health_probes() -> None:
    limiter = InFlightLimiter(read_only=1, mutating=1)

    async def limit(request: web.Request, handler: middleware.Handler) -> web.StreamResponse:
        info = request[keys.REQUEST_INFO]
        long_running = longrunning.LongRunning(STANDALONE_RESOURCES)
        with middleware.in_flight_slot(
            limiter, request, info, request[keys.USER], long_running=long_running
        ):
            return await handler(request)

    release = asyncio.Event()
    seen_long_running: list[int] = []

    async def hold(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="held")

    async def count(request: web.Request) -> web.StreamResponse:
        seen_long_running.append(limiter.long_running)
        return web.Response(text="ok")

    holders = [
        asyncio.create_task(limit(_request("GET", RUNS, VIEWER), hold)),
        asyncio.create_task(limit(_request("POST", RUNS, VIEWER), hold)),
    ]
    await eventually(lambda: limiter.in_flight(READ) == limiter.in_flight(WRITE) == 1)

    for method, path in [("GET", RUNS), ("DELETE", f"{RUNS}/r"), ("GET", "/version")]:
        with pytest.raises(errors.TooManyRequests):
            await limit(_request(method, path, VIEWER), _ok)
    for method, path in [
        ("GET", f"{RUNS}?watch=true"),
        ("POST", f"{RUNS}/r/invoke?stream=true"),
        ("POST", f"{RUNS}/r/proxy/v1/chat/completions"),
    ]:
        assert (await limit(_request(method, path, VIEWER), count)).status == 200
    for path in ("/healthz", "/livez", "/readyz"):
        assert (await limit(_request("GET", path, VIEWER), _ok)).status == 200
    assert (await limit(_request("POST", RUNS, ADMIN), _ok)).status == 200
    assert seen_long_running == [1, 1, 1]

    release.set()
    assert [(await task).status for task in holders] == [200, 200]
    assert (limiter.in_flight(READ), limiter.in_flight(WRITE), limiter.long_running) == (0, 0, 0)
    assert (await limit(_request("GET", RUNS, VIEWER), _ok)).status == 200


# --- over HTTPS -------------------------------------------------------------------------


def _metric(text: str, name: str, labels: str) -> float:
    found = re.search(rf"^{name}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(found.group(1)) if found else -1.0


@pytest.fixture
async def limited_api(etcd_endpoint: str, tmp_path: Path) -> AsyncIterator[Api]:
    limits = ServingLimits(max_requests_inflight=1, max_mutating_requests_inflight=1)
    async with serving(etcd_endpoint, tmp_path, limits=limits) as client:
        yield client


async def test_over_https_a_held_write_makes_the_next_write_a_429_before_authorization(
    limited_api: Api, tmp_path: Path
) -> None:
    api = limited_api
    viewer_cert = tls.write_client_cert(
        tls.client_ca(api.pki), tmp_path / "viewer", common_name="v", organizations=["plnt:viewers"]
    )
    body = json.dumps(workflowrun("held")).encode()
    context = tls.client_context(api.pki, cert=tls.admin(api.pki))
    host, port = api.url.removeprefix("https://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port), ssl=context)
    try:
        # The admin's create holds the one mutating slot while its body trickles in.
        writer.write(
            f"POST {BASE} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:10]
        )
        await writer.drain()

        async def held() -> bool:
            text = (await api.call("GET", "/metrics")).text
            labels = 'request_kind="mutating"'
            return _metric(text, "plnt_apiserver_current_inflight_requests", labels) == 1.0

        await eventually(held, what="the trickling create to hold the mutating slot")

        async with tls.client_session(api.pki, cert=viewer_cert) as viewer:
            async with viewer.delete(f"{api.url}{BASE}/x") as refused:
                status = json.loads(await refused.text())
                assert refused.status == 429, status
                assert refused.headers["Retry-After"] == "1"
                assert status["reason"] == "TooManyRequests"
                assert status["message"] == KUBE_MESSAGE
                assert status["details"] == {"retryAfterSeconds": 1}
            async with viewer.get(f"{api.url}{BASE}") as listed:
                assert listed.status == 200  # reads have their own budget
            async with viewer.get(f"{api.url}/readyz") as ready:
                assert ready.status == 200
            # system:masters is served even now.
            admitted = await api.call("POST", BASE, body=workflowrun("admin-now"))
            assert admitted.status == 201, admitted.text

            writer.write(body[10:])
            await writer.drain()
            status_line = await reader.readline()
            assert status_line.startswith(b"HTTP/1.1 201"), status_line

            async with viewer.delete(f"{api.url}{BASE}/x") as after:
                assert after.status == 403  # the slot is free: authorization decides again
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()
    metrics = (await api.call("GET", "/metrics")).text
    dropped = 'plnt_apiserver_dropped_requests_total{request_kind="mutating"} 1.0'
    assert dropped in metrics
    assert (
        'plnt_apiserver_requests_total{code="429",group="plnt.work",resource="workflowruns",'
        'subresource="",verb="delete"} 1.0' in metrics
    )
