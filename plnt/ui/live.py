"""The live parts of the pages: the API's watches, relayed to the browser as Server-Sent Events.

Each stream opens the watches its page needs with the user's client, keeps the objects
they describe, and after every change sends the page's affected fragments rendered by
the same templates as the page itself. A message is one JSON object:

* `{"replace": {ID: HTML}}` — set the element's content;
* `{"prepend": {ID: HTML}}` — add rows at the top (the invocation log, newest first);
* `{"clear": [ID]}` — empty an element (a stream that starts over resends its rows);
* `{"error": MESSAGE}` — the API refused (its Status message, e.g. RBAC's 403).

Nothing here polls: a message follows an event of a watch, except that while a saga
step or an Invocation runs, the page is redrawn from the objects already held every two
seconds so the running bar and the durations grow.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from plnt.api import codec, names
from plnt.client import ApiError, ClientError, NotFound, PlntClient, WatchEvent
from plnt.ui import benches, following, keys, rendering, views
from plnt.ui import invocations as invocation_views
from plnt.ui import runs as run_views

RUNNING_REDRAW_SECONDS = 2.0
Message = dict[str, Any]


def now() -> datetime:
    return datetime.now(UTC)


async def _open(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    response.headers.update({k: v for k, v in rendering.HEADERS.items() if k != "Cache-Control"})
    await response.prepare(request)
    await response.write(b"retry: 5000\n\n")
    return response


async def _send(response: web.StreamResponse, message: Message) -> None:
    await response.write(b"data: " + codec.dumps(message) + b"\n\n")


def _message_of(error: ClientError) -> str:
    return getattr(error, "message", None) or str(error)


async def _relay(request: web.Request, source: AsyncIterator[Message | None]) -> web.StreamResponse:
    """Send what `source` yields (None: nothing to send) until the browser goes away."""
    response = await _open(request)
    try:
        async for message in source:
            if message is not None:
                await _send(response, message)
    except ClientError as error:
        with contextlib.suppress(ConnectionError):
            await _send(response, {"error": _message_of(error)})
    except ConnectionError:
        pass
    return response


async def _merged(
    sources: Mapping[str, AsyncIterator[tuple[str, Any]]], *, idle: Callable[[], float | None]
) -> AsyncIterator[tuple[str, str, Any]]:
    """Events of several follows as `(source, type, object)`; `("", "TICK", None)` after
    `idle()` seconds without one. The first failure of any source is raised."""
    queue: asyncio.Queue[tuple[str, str, Any] | BaseException] = asyncio.Queue()

    async def pump(name: str, source: AsyncIterator[tuple[str, Any]]) -> None:
        try:
            async for kind, obj in source:
                await queue.put((name, kind, obj))
        except Exception as error:  # handed to the consumer, which raises it
            await queue.put(error)

    tasks = [asyncio.create_task(pump(name, source)) for name, source in sources.items()]
    try:
        while True:
            try:
                async with asyncio.timeout(idle()):
                    item = await queue.get()
            except TimeoutError:
                yield "", "TICK", None
                continue
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _client(request: web.Request) -> PlntClient:
    return request.app[keys.CLIENT]


async def runs(request: web.Request) -> web.StreamResponse:
    """The Runs page's table, following every WorkflowRun of the namespace."""
    client = _client(request)
    namespace = request.match_info["namespace"]
    path = client.collection_path(names.WORKFLOWRUNS, namespace=namespace)
    state: dict[str, dict[str, Any]] = {}

    async def messages() -> AsyncIterator[Message | None]:
        async for kind, obj in following.follow(client, path):
            following.apply(state, kind, obj)
            html = rendering.fragment(
                request,
                "runs_rows.html",
                rows=views.run_rows(state.values(), now()),
                namespace=namespace,
            )
            yield {"replace": {"runs-body": html}}

    return await _relay(request, messages())


def run_fragments(request: web.Request, run: Mapping[str, Any]) -> dict[str, str]:
    """The parts of the Run page that follow the WorkflowRun itself, from its `RunView`
    (the route names the run and its namespace, whatever the object carries)."""
    view = run_views.run_view(run, now())
    context = {
        "view": view,
        "namespace": request.match_info.get("namespace", ""),
        "run_name": request.match_info.get("name", ""),
    }
    return {
        "run-summary": rendering.fragment(request, "run_summary.html", **context),
        "run-timeline": rendering.fragment(request, "run_timeline.html", **context),
        "run-conditions": rendering.fragment(request, "run_conditions.html", **context),
        "run-history": rendering.fragment(request, "run_history.html", **context),
        "run-evaluation": rendering.fragment(
            request, "run_evaluation.html", evaluation=view.evaluation
        ),
        "run-slo": rendering.fragment(request, "run_slo.html", slo=view.slo),
    }


BACKEND_EVENTS = "involvedObject.kind=PlntBackend"
"""The field selector of the Events the Backends page shows (the prober's transitions)."""


def events_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/events"


def events_fragment(request: web.Request, events: Mapping[str, Mapping[str, Any]]) -> str:
    """The Run page's Events, newest first."""
    rows = views.event_rows(events.values(), now())
    return rendering.fragment(request, "run_events.html", rows=rows)


def _running(run: Mapping[str, Any] | None) -> bool:
    saga = ((run or {}).get("status") or {}).get("saga") or []
    return any(step.get("state") == "Running" for step in saga)


def invocations_fragment(
    request: web.Request,
    invocations: Mapping[str, Mapping[str, Any]],
    *,
    namespace: str,
    run_name: str,
    problem: str = "",
) -> str:
    """The Run page's list of the run's Invocations (the kind), newest first."""
    return rendering.fragment(
        request,
        "run_invocations.html",
        rows=invocation_views.invocation_object_rows(invocations.values(), now()),
        namespace=namespace,
        run_name=run_name,
        problem=problem,
    )


def invocations_of(client: PlntClient, namespace: str, run_name: str) -> tuple[str, dict[str, str]]:
    """The collection path and the field selector of one run's Invocations."""
    path = client.collection_path(invocation_views.PLURAL, namespace=namespace)
    return path, {"fieldSelector": f"spec.workflowRun={run_name}"}


async def _or_refusal(source: AsyncIterator[tuple[str, Any]]) -> AsyncIterator[tuple[str, Any]]:
    """`source`, ending with `("REFUSED", message)` when the API refuses it (RBAC may let a
    user read runs but not Invocations: the rest of the page stays live)."""
    try:
        async for item in source:
            yield item
    except ApiError as error:
        yield "REFUSED", _message_of(error)


async def run(request: web.Request) -> web.StreamResponse:
    """The Run page: the WorkflowRun (timeline, conditions, history, traffic), its
    Invocations and its Events."""
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    runs_path = client.collection_path(names.WORKFLOWRUNS, namespace=namespace)
    invocations_path, invocations_params = invocations_of(client, namespace, name)
    held: dict[str, dict[str, Any]] = {}
    events: dict[str, dict[str, Any]] = {}
    invocations: dict[str, dict[str, Any]] = {}
    refused = {"message": ""}

    def idle() -> float | None:
        running = _running(held.get(name)) or any(
            invocation_views.invocation_object_row(obj, now()).running
            for obj in invocations.values()
        )
        return RUNNING_REDRAW_SECONDS if running else None

    def invocations_html() -> str:
        return invocations_fragment(
            request, invocations, namespace=namespace, run_name=name, problem=refused["message"]
        )

    async def messages() -> AsyncIterator[Message | None]:
        sources = {
            "run": following.follow(
                client, runs_path, params={"fieldSelector": f"metadata.name={name}"}
            ),
            "events": following.follow(
                client,
                events_path(namespace),
                params={
                    "fieldSelector": f"involvedObject.kind=WorkflowRun,involvedObject.name={name}"
                },
            ),
            "invocations": _or_refusal(
                following.follow(client, invocations_path, params=invocations_params)
            ),
        }
        async for source, kind, obj in _merged(sources, idle=idle):
            if source == "events":
                following.apply(events, kind, obj)
                yield {"replace": {"run-events": events_fragment(request, events)}}
                continue
            if source == "invocations":
                if kind == "REFUSED":
                    refused["message"] = str(obj)
                else:
                    following.apply(invocations, kind, obj)
                yield {"replace": {"run-invocations": invocations_html()}}
                continue
            if source == "run":
                following.apply(held, kind, obj)
            current = held.get(name)
            if current is None:
                if source == "run":
                    yield {"error": f"workflowrun {name} does not exist (any more)"}
                continue
            fragments = run_fragments(request, current)
            if source == "":  # a tick: durations of running Invocations grow too
                fragments["run-invocations"] = invocations_html()
            yield {"replace": fragments}

    return await _relay(request, messages())


def invocation_fragment(request: web.Request, obj: Mapping[str, Any], *, namespace: str) -> str:
    """The Invocation page's content: phase, output or error, trace."""
    return rendering.fragment(
        request,
        "invocation_detail.html",
        inv=invocation_views.invocation_view(obj, now()),
        namespace=namespace,
    )


async def invocation(request: web.Request) -> web.StreamResponse:
    """The Invocation page, following the one Invocation until the browser goes away."""
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["invocation"]
    path = client.collection_path(invocation_views.PLURAL, namespace=namespace)
    held: dict[str, dict[str, Any]] = {}

    def idle() -> float | None:
        current = held.get(name)
        running = current is not None and (
            invocation_views.invocation_object_row(current, now()).running
        )
        return RUNNING_REDRAW_SECONDS if running else None

    async def messages() -> AsyncIterator[Message | None]:
        sources = {
            "invocation": following.follow(
                client, path, params={"fieldSelector": f"metadata.name={name}"}
            )
        }
        async for _source, kind, obj in _merged(sources, idle=idle):
            if kind != "TICK":
                following.apply(held, kind, obj)
            current = held.get(name)
            if current is None:
                yield {"error": f"invocation {name} does not exist (any more)"}
                continue
            yield {
                "replace": {
                    "invocation-detail": invocation_fragment(request, current, namespace=namespace)
                }
            }

    return await _relay(request, messages())


async def invocations(request: web.Request) -> web.StreamResponse:
    """The invocation log, followed: the entries held, then each one as it is recorded."""
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    path = client.object_path(
        names.WORKFLOWRUNS, name, namespace=namespace, subresource="invocationlog"
    )

    async def messages() -> AsyncIterator[Message | None]:
        yield {"clear": ["invocations-body"]}
        events: AsyncIterator[WatchEvent] = client.watch(path)
        async for event in events:
            row = views.invocation_row(event.object)
            html = rendering.fragment(request, "invocation_row.html", row=row)
            yield {"prepend": {"invocations-body": html}}

    return await _relay(request, messages())


async def backends(request: web.Request) -> web.StreamResponse:
    """The backend selector's table, following every PlntBackend of the namespace and the
    Events about them (each backend's recent ones under its row)."""
    client = _client(request)
    namespace = request.match_info["namespace"]
    selected_run = request.query.get("run", "")
    current = request.query.get("current", "")
    path = client.collection_path(names.BACKENDS, namespace=namespace)
    state: dict[str, dict[str, Any]] = {}
    events: dict[str, dict[str, Any]] = {}

    async def messages() -> AsyncIterator[Message | None]:
        sources = {
            "backends": following.follow(client, path),
            "events": following.follow(
                client, events_path(namespace), params={"fieldSelector": BACKEND_EVENTS}
            ),
        }
        async for source, kind, obj in _merged(sources, idle=lambda: None):
            following.apply(events if source == "events" else state, kind, obj)
            rows = sorted((views.backend_row(b) for b in state.values()), key=lambda r: r.name)
            html = rendering.fragment(
                request,
                "backend_rows.html",
                rows=rows,
                events=views.backend_events(events.values(), now()),
                run_name=selected_run,
                current=current,
                namespace=namespace,
            )
            yield {"replace": {"backends-body": html}}

    return await _relay(request, messages())


BENCH_PROGRESS_SECONDS = 1.0


async def read_bench(client: PlntClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The run's current or last bench (GET …/bench); None when it was never benched."""
    path = client.object_path(names.WORKFLOWRUNS, name, namespace=namespace, subresource="bench")
    try:
        body = (await client.request("GET", path)).json()
    except NotFound:
        return None
    return body if isinstance(body, dict) else None


async def bench(request: web.Request) -> web.StreamResponse:
    """The Bench page's result: follows the run (a finished bench lands in its status) and,
    while a bench runs, reads its progress each second: the API has no watch of the
    measuring activity's heartbeat, the one place progress lives."""
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    runs_path = client.collection_path(names.WORKFLOWRUNS, namespace=namespace)
    current: dict[str, Any] = {}

    def idle() -> float | None:
        phase = ((current.get("bench") or {}).get("status") or {}).get("phase")
        return BENCH_PROGRESS_SECONDS if phase in ("Pending", "Running") else None

    async def messages() -> AsyncIterator[Message | None]:
        sources = {
            "run": following.follow(
                client, runs_path, params={"fieldSelector": f"metadata.name={name}"}
            )
        }
        async for _source, _kind, _obj in _merged(sources, idle=idle):
            current["bench"] = await read_bench(client, namespace, name)
            html = rendering.fragment(
                request, "bench_result.html", bench=benches.bench_view(current["bench"])
            )
            yield {"replace": {"bench-result": html}}

    return await _relay(request, messages())
