"""kube-apiserver's request timeout: which requests are long-running, and the cut of the rest.

Part of the kube-apiserver stand-in (a test double: no kube-apiserver runs here). It
follows k8s.io/apiserver `server/filters/longrunning.go` (`BasicLongRunningRequestCheck`
with the sets kube-apiserver configures in `pkg/controlplane/apiserver/config.go`),
`endpoints/filters/request_deadline.go` (`WithRequestDeadline`) and
`server/filters/timeout.go` (`WithTimeoutForNonLongRunningRequests`):

* **Long-running** are the verbs `watch` (a collection GET with `?watch=`, or the
  deprecated `/watch/` prefix) and `proxy` (the deprecated `/proxy/` prefix), every
  resource request for the subresources `attach`, `exec`, `proxy`, `log` and
  `portforward` (so `…/workflowruns/NAME/proxy/PATH` as kube's `services/NAME/proxy`),
  and the non-resource `/debug/pprof/` paths. They run as long as they run.
* **Every other request** gets a deadline: `--request-timeout` (60 s by default), or the
  client's `?timeout=` (a Go duration) when that is shorter and above zero; a
  `?timeout=` Go cannot parse is a 400. The deadline covers authentication,
  authorization and the handler — the aggregator's proxy included, so a backend that
  answers late is cut like any handler.
* **At the deadline**, if nothing of the answer was written, the handler is cancelled
  (the proxied backend sees its connection go away) and the client gets a 504 whose
  body is the `metav1.Status` of `NewTimeoutError("request did not complete within the
  allotted timeout", 0)` as kube's `json.Encoder` writes it: no `kind` or `apiVersion`
  (the filter encodes the bare struct), `"details":{}`, a trailing newline, and — since
  the filter sets no Content-Type — the type Go's server sniffs, `text/plain;
  charset=utf-8` (so client-go, finding no decoder, reports its own generic message:
  kubectl prints `Error from server (Timeout): the server was unable to return a
  response in the time allotted, but may still be processing the request`). The
  `Cache-Control: no-cache, private` set by an outer filter comes along.
* **If the answer had started** (its status line and headers were sent), nothing can
  change it any more: kube aborts the handler, and over HTTP/1.1 (what the stand-in
  serves) the connection is closed mid-answer, so the client sees a truncated body.
  A write the handler tries after the deadline fails (`HandlerTimedOut`), as Go's
  `http.ErrHandlerTimeout`.

Not modelled: the post-timeout metrics and logs, `Audit-Id`, HTTP/2 (where kube resets
the one stream instead of the connection).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from tests.support.kube import attributes, statuses

DEFAULT_REQUEST_TIMEOUT = 60.0
"""kube-apiserver's `--request-timeout` default, in seconds."""
LONG_RUNNING_VERBS = frozenset({"watch", "proxy"})
LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "proxy", "log", "portforward"})
TIMEOUT_MESSAGE = "Timeout: request did not complete within the allotted timeout"
TIMEOUT_BODY = (
    json.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": TIMEOUT_MESSAGE,
            "reason": "Timeout",
            "details": {},
            "code": 504,
        },
        separators=(",", ":"),
    )
    + "\n"
)
"""The 504's body, byte for byte as kube's timeout filter encodes it."""
SNIFFED_TEXT = "text/plain; charset=utf-8"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_STARTED = web.RequestKey("kube-answer-started", web.StreamResponse)
_TIMED_OUT = web.RequestKey("kube-timed-out", web.StreamResponse)


class HandlerTimedOut(Exception):
    """A handler tried to start its answer after its request's deadline had passed."""


def is_long_running(attrs: attributes.Attributes) -> bool:
    """`BasicLongRunningRequestCheck` with kube-apiserver's verbs and subresources."""
    if attrs.verb in LONG_RUNNING_VERBS:
        return True
    if attrs.resource_request:
        return attrs.subresource in LONG_RUNNING_SUBRESOURCES
    return attrs.path.startswith("/debug/pprof/")


# --- Go durations ------------------------------------------------------------------------

_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
    "h": 3600.0,
}  # fmt: skip
_NUMBER = re.compile(r"(\d*)(?:\.(\d*))?")
_MAX_SECONDS = (2**63 - 1) / 1e9  # time.Duration is an int64 of nanoseconds


def _go_quote(text: str) -> str:
    return statuses.go_quote(text)


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration (`32s`, `1m30s`, `1.5h`, `-2ms`), as `time.ParseDuration`
    reads it; raises ValueError with Go's own message otherwise."""
    invalid = ValueError(f"time: invalid duration {_go_quote(text)}")
    rest = text
    sign = 1.0
    if rest[:1] in ("-", "+"):
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise invalid
    total = 0.0
    while rest:
        number = _NUMBER.match(rest)
        assert number is not None  # the pattern matches the empty string
        whole, fraction = number.group(1), number.group(2)
        if not whole and not fraction:
            raise invalid
        rest = rest[number.end() :]
        unit_end = next((i for i, c in enumerate(rest) if c == "." or c.isdigit()), len(rest))
        unit, rest = rest[:unit_end], rest[unit_end:]
        if not unit:
            raise ValueError(f"time: missing unit in duration {_go_quote(text)}")
        if unit not in _UNITS:
            raise ValueError(f"time: unknown unit {_go_quote(unit)} in duration {_go_quote(text)}")
        total += float(f"{whole or '0'}.{fraction or '0'}") * _UNITS[unit]
        if total > _MAX_SECONDS:
            raise invalid
    return sign * total


def deadline_seconds(query: Mapping[str, str], request_timeout: float) -> float:
    """The request's allotted time: `request_timeout`, or a shorter positive `?timeout=`.

    Raises the 400 kube answers for a `?timeout=` that is not a Go duration.
    """
    value = query.get("timeout", "")
    if not value:
        return request_timeout
    try:
        asked = parse_go_duration(value)
    except ValueError as error:
        raise statuses.bad_request(
            f"invalid timeout specified in the request URL - {error}"
        ) from error
    return asked if 0 < asked < request_timeout else request_timeout


# --- the filter ----------------------------------------------------------------------


def timeout_response() -> web.Response:
    """The 504 kube writes when a request outlives its deadline before answering."""
    response = web.Response(status=504, body=TIMEOUT_BODY.encode())
    response.headers["Content-Type"] = SNIFFED_TEXT
    response.headers["Cache-Control"] = "no-cache, private"
    return response


async def on_response_prepare(request: web.Request, response: web.StreamResponse) -> None:
    """Remember that the answer started (its headers are about to leave), and refuse a
    handler that starts one after its deadline (only the 504 itself may go out then)."""
    timed_out = request.get(_TIMED_OUT)
    if timed_out is not None and response is not timed_out:
        raise HandlerTimedOut(f"{request.method} {request.path}: the request timed out")
    request[_STARTED] = response


def middleware(request_timeout: Callable[[web.Request], float]) -> Handler:
    """The filter, reading the configured `--request-timeout` of each request's app."""

    @web.middleware
    async def cut_non_long_running(request: web.Request, handler: Handler) -> web.StreamResponse:
        attrs = attributes.request_attributes(
            attributes.ANONYMOUS, request.method, request.path, request.query
        )
        if is_long_running(attrs):
            return await handler(request)
        seconds = deadline_seconds(request.query, request_timeout(request))
        return await _within(request, handler, seconds)

    return cut_non_long_running


async def _within(request: web.Request, handler: Handler, seconds: float) -> web.StreamResponse:
    # As kube: the handler runs apart from the filter, which answers at the deadline
    # whether or not the handler cooperates with its cancellation.
    task = asyncio.ensure_future(handler(request))
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:  # the client went away first
        await _stop(task)
        raise
    if task in done:
        return task.result()
    started = request.get(_STARTED)
    if started is not None:
        # Headers went out: only a killed connection tells the client the answer is cut.
        request[_TIMED_OUT] = started
        if request.transport is not None:
            request.transport.abort()
        await _stop(task)
        return started  # finishing it fails on the closed connection, as a reset
    answer = timeout_response()
    request[_TIMED_OUT] = answer
    await _stop(task)
    return answer


async def _stop(task: asyncio.Future[web.StreamResponse]) -> None:
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: what a handler did past its deadline answers nobody
