"""The pages: each reads what it shows through the user's client and renders a template.

A page is complete when it arrives (it works without JavaScript, as a snapshot); its
`data-live` elements then follow the matching stream of `live`. API failures are not
handled here: the app's error middleware shows them as pages in the API's own words.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from plnt.api import names
from plnt.client import ApiError, ClientError, PlntClient
from plnt.ui import benches, forms, keys, live, rendering, views
from plnt.ui import invocations as invocation_views


def _client(request: web.Request) -> PlntClient:
    return request.app[keys.CLIENT]


def _revisions(obj: dict[str, Any]) -> list[int]:
    """The run's revisions in its history, newest first (the pages' revision filters)."""
    history = (obj.get("status") or {}).get("history") or []
    return sorted({int(r.get("revision") or 0) for r in history}, reverse=True)


async def index(request: web.Request) -> web.StreamResponse:
    """The context's namespace's runs."""
    namespace = _client(request).namespace
    return web.Response(status=303, headers={"Location": f"/ns/{namespace}/runs"})


async def _namespaces(client: PlntClient, current: str) -> list[str]:
    """Namespaces the user may list (with the current one always there); none when forbidden."""
    try:
        found = await client.list_all("/api/v1/namespaces")
    except ClientError:
        found = []
    names = {str((n.get("metadata") or {}).get("name") or "") for n in found}
    return sorted(names | {current})


async def runs(request: web.Request) -> web.StreamResponse:
    client = _client(request)
    namespace = request.match_info["namespace"]
    items = await client.list_workflowruns(namespace=namespace)
    return rendering.page(
        request,
        "runs.html",
        rows=views.run_rows(items, live.now()),
        namespaces=await _namespaces(client, namespace),
        title="Runs",
    )


async def run(request: web.Request) -> web.StreamResponse:
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    obj = await client.get_workflowrun(name, namespace=namespace)
    try:
        events = await client.events_for(name, namespace=namespace)
    except ApiError:
        events = []
    path, params = live.invocations_of(client, namespace, name)
    problem = ""
    try:
        invocations = await client.list_all(path, params=params)
    except ApiError as error:
        invocations, problem = [], error.message
    return rendering.page(
        request,
        "run.html",
        fragments=live.run_fragments(request, obj),
        events=live.events_fragment(request, {str(i): e for i, e in enumerate(events)}),
        invocations=live.invocations_fragment(
            request,
            {str(i): item for i, item in enumerate(invocations)},
            namespace=namespace,
            run_name=name,
            problem=problem,
        ),
        title=name,
    )


async def invocation(request: web.Request) -> web.StreamResponse:
    """One Invocation: its phase, output or error, and step trace."""
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["invocation"]
    path = client.object_path(invocation_views.PLURAL, name, namespace=namespace)
    obj = (await client.request("GET", path)).json()
    return rendering.page(
        request,
        "invocation.html",
        detail=live.invocation_fragment(request, obj, namespace=namespace),
        invocation_name=name,
        run_name=str((obj.get("spec") or {}).get("workflowRun") or ""),
        title=name,
    )


async def backends(request: web.Request) -> web.StreamResponse:
    client = _client(request)
    namespace = request.match_info["namespace"]
    run_name = request.query.get("run", "")
    items = await client.list_backends(namespace=namespace)
    try:
        events = await client.list_all(
            live.events_path(namespace), params={"fieldSelector": live.BACKEND_EVENTS}
        )
    except ApiError:
        events = []
    current = ""
    if run_name:
        obj = await client.get_workflowrun(run_name, namespace=namespace)
        current = str(((obj.get("spec") or {}).get("backend") or {}).get("name") or "")
    runs_list = await client.list_workflowruns(namespace=namespace)
    return rendering.page(
        request,
        "backends.html",
        rows=sorted((views.backend_row(b) for b in items), key=lambda r: r.name),
        events=views.backend_events(events, live.now()),
        run_name=run_name,
        current=current,
        run_names=sorted(views.run_row(r, live.now()).name for r in runs_list),
        title="Backends",
    )


async def invocations(request: web.Request) -> web.StreamResponse:
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    obj = await client.get_workflowrun(name, namespace=namespace)
    revisions = _revisions(obj)
    return rendering.page(request, "invocations.html", revisions=revisions, title=name)


async def describe_workflow(client: PlntClient, namespace: str, name: str) -> dict[str, Any]:
    """The workflow's `plnt` facts from its runner's `/v1/models` (inputs schema, chat input),
    through the proxy subresource; raises the client's errors when no runner answers."""
    path = client.object_path(
        names.WORKFLOWRUNS, name, namespace=namespace, subresource="proxy/v1/models"
    )
    body = (await client.request("GET", path)).json() or {}
    for model in body.get("data") or []:
        facts = model.get("plnt")
        if isinstance(facts, dict):
            return facts
    return {}


async def invoke(request: web.Request) -> web.StreamResponse:
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    await client.get_workflowrun(name, namespace=namespace)  # 404/403 as a page
    problem = ""
    facts: dict[str, Any] = {}
    try:
        facts = await describe_workflow(client, namespace, name)
    except ApiError as error:
        problem = error.message
    schema = facts.get("inputs") if isinstance(facts.get("inputs"), dict) else None
    return rendering.page(
        request,
        "invoke.html",
        fields=forms.fields(schema),
        chat_input=str(facts.get("chatInput") or ""),
        problem=problem,
        title=name,
    )


async def bench(request: web.Request) -> web.StreamResponse:
    client = _client(request)
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    obj = await client.get_workflowrun(name, namespace=namespace)
    revisions = _revisions(obj)
    current = await live.read_bench(client, namespace, name)
    return rendering.page(
        request, "bench.html", revisions=revisions, bench=benches.bench_view(current), title=name
    )
