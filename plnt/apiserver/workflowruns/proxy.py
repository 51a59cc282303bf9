"""The `proxy` subresource: a run's runners, OpenAI API and all, through the API server.

As kube's `services/NAME/proxy/PATH`, `…/namespaces/NS/workflowruns/NAME/proxy/PATH` forwards
the request to `PATH` on one of the run's runners, so

    OpenAI(base_url="https://SERVER/apis/plnt.work/v1/namespaces/NS/workflowruns/NAME/proxy/v1",
           api_key=TOKEN)

reaches the run's `/v1/chat/completions` and `/v1/models` (and `…/proxy/invoke` its
`/invoke`). The runner is chosen exactly as `invoke` chooses it — a revision by
`status.traffic` weight, the least busy ready endpoint — and the forwarding is `invoke`'s
(`invoke.forward`): pooled connections, one failover on a connection error, streams (SSE,
NDJSON) relayed as they arrive, `X-Plnt-Revision`, `Server-Timing` with `apiserver;dur=`.
POSTs are invocations: they go in the invocation log with their `path` and, for streams,
`timeToFirstTokenMs`.

What is sent on: the method, the path below `proxy` (cleaned of `.` and `..`), the query
string as it came, the body, `Content-Type`, `Accept` and `Cache-Control` (a caller may
bypass the step cache: `plnt.api.headers`). Never the caller's
`Authorization`: plnt authenticated it, and the runner is no place for user credentials.

Authorization is kube's for a proxy subresource: resource `workflowruns`, subresource
`proxy`, the verb from the HTTP method (GET/HEAD `get`, POST `create`). The runner serves
only GET and POST, so only GET, HEAD and POST are proxied (405 otherwise), and discovery
lists the verbs `get` and `create`. Errors on this path are OpenAI's shape
(`openai_errors`, registered as the subresource's error renderer in `routes`).
"""

from __future__ import annotations

import posixpath
import time

from aiohttp import web

from plnt.api import errors
from plnt.api.headers import CACHE_CONTROL
from plnt.apiserver import keys, params
from plnt.apiserver.requestinfo import RequestInfo
from plnt.apiserver.workflowruns import invoke
from plnt.registry.store import ResourceStore

PROXIED_METHODS = frozenset({"GET", "HEAD", "POST"})
_FORWARDED_HEADERS = ("Content-Type", "Accept", CACHE_CONTROL)
"""Passed to the runner as the caller sent them: the body's type, the answer wanted, and
whether the call may use the step cache (`plnt.api.headers`)."""
_PREFIX_SEGMENTS = 9  # "", apis, group, version, namespaces, NS, workflowruns, NAME, proxy


def proxied_path(raw_path: str) -> str:
    """The path below `…/NAME/proxy`, still percent-encoded, `.` and `..` resolved."""
    tail = "/".join(raw_path.split("/")[_PREFIX_SEGMENTS:])
    cleaned = posixpath.normpath("/" + tail) if tail else "/"
    if tail.endswith("/") and not cleaned.endswith("/"):
        cleaned += "/"
    return "/" + cleaned.lstrip("/")


async def handle_proxy(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.StreamResponse:
    began = time.perf_counter()
    if request.method not in PROXIED_METHODS:
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    body = b""
    if request.method == "POST":
        body = await params.read_body(
            request, limit=request.app[keys.SETTINGS].max_request_body_bytes
        )
    call = invoke.Call(
        request.method,
        proxied_path(request.rel_url.raw_path),
        request.rel_url.raw_query_string,
        body,
        {name: request.headers[name] for name in _FORWARDED_HEADERS if name in request.headers},
        logged=request.method == "POST",
        log_path=True,
    )
    return await invoke.forward(request, store, info, call, began=began)
