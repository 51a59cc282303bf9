"""State-changing requests from the pages: rollback, promote, abort, backend switch, invoke.

Each is a POST with a JSON body (the `security` middleware has checked its Origin and
CSRF token), makes one call with the user's client, and answers JSON: `{"message": …}`
and what the page shows on success, or `{"error": {"code", "message", "fields"}}` with
the API's status code and its Status message (RBAC's 403, a 409 "no canary is pausing",
the runner's 422 with a message per input field) so the page can show it as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from plnt.api import codec, names
from plnt.client import ApiError, ClientError, PlntClient, transport
from plnt.ui import forms, keys, pages, rendering, steptraces


def _client(request: web.Request) -> PlntClient:
    return request.app[keys.CLIENT]


def _invoke_timeout(request: web.Request) -> float:
    return request.app[keys.SETTINGS].invoke_timeout_seconds


def _target(request: web.Request) -> tuple[str, str]:
    return request.match_info["namespace"], request.match_info["name"]


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = codec.loads(await request.read() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return body


def failure(error: ClientError) -> web.Response:
    """The API's refusal as the page shows it: its code, its message, its field causes."""
    code = error.code if isinstance(error, ApiError) else 502
    message = error.message if isinstance(error, ApiError) else str(error)
    fields: dict[str, str] = {}
    if isinstance(error, ApiError):
        for cause in error.causes:
            key = forms.field_of(cause.field)
            fields[key] = f"{fields[key]}; {cause.message}" if key in fields else cause.message
    return web.json_response(
        {"error": {"code": code, "message": message, "fields": fields}}, status=code
    )


def _done(message: str, **extra: Any) -> web.Response:
    return web.json_response({"message": message, **extra})


async def rollback(request: web.Request) -> web.StreamResponse:
    namespace, name = _target(request)
    body = await _body(request)
    revision = body.get("toRevision")
    to = int(revision) if isinstance(revision, int | str) and str(revision).isdigit() else None
    try:
        obj = await _client(request).rollback(name, to_revision=to, namespace=namespace)
    except ClientError as error:
        return failure(error)
    generation = (obj.get("metadata") or {}).get("generation")
    target = "the previous revision" if to is None else f"revision {to}"
    return _done(f"rolling back to {target}: generation {generation} is deploying")


async def _steer(request: web.Request, verb: str) -> web.StreamResponse:
    namespace, name = _target(request)
    client = _client(request)
    try:
        status = await (client.promote if verb == "promote" else client.abort)(
            name, namespace=namespace
        )
    except ClientError as error:
        return failure(error)
    return _done(str(status.get("message") or f"{verb}: done"))


async def promote(request: web.Request) -> web.StreamResponse:
    return await _steer(request, "promote")


async def abort(request: web.Request) -> web.StreamResponse:
    return await _steer(request, "abort")


async def backend(request: web.Request) -> web.StreamResponse:
    """Point the run at another PlntBackend: a merge patch of `spec.backend.name`."""
    namespace, name = _target(request)
    chosen = (await _body(request)).get("backend")
    if not isinstance(chosen, str) or not chosen:
        raise web.HTTPBadRequest(text="name the backend")
    client = _client(request)
    path = client.object_path(names.WORKFLOWRUNS, name, namespace=namespace)
    patch = {"spec": {"backend": {"name": chosen, "selector": None}}}
    try:
        reply = await client.request("PATCH", path, json=patch, content_type=transport.MERGE_PATCH)
    except ClientError as error:
        return failure(error)
    generation = ((reply.json() or {}).get("metadata") or {}).get("generation")
    return _done(f"{name} now uses backend {chosen}: generation {generation} is deploying")


async def invoke(request: web.Request) -> web.StreamResponse:
    """Run the workflow once with the form's values; the output, trace and where it ran."""
    namespace, name = _target(request)
    values = (await _body(request)).get("values")
    client = _client(request)
    try:
        facts = await pages.describe_workflow(client, namespace, name)
        schema = facts.get("inputs") if isinstance(facts.get("inputs"), dict) else None
        inputs = forms.inputs(forms.fields(schema), values if isinstance(values, Mapping) else {})
        result = await client.invoke(
            name, inputs, namespace=namespace, request_timeout=_invoke_timeout(request)
        )
    except forms.FormError as error:
        return web.json_response(
            {"error": {"code": 400, "message": str(error), "fields": {error.field: str(error)}}},
            status=400,
        )
    except ClientError as error:
        return failure(error)
    body = result.body if isinstance(result.body, dict) else {}
    return _done(
        f"revision {result.revision}, cache {result.cache}",
        output=result.output,
        # The trace as the Invocation page shows it (same template), for the form to place.
        traceHtml=rendering.fragment(
            request, "step_trace.html", steps=steptraces.step_rows(body.get("trace"))
        ),
        revision=result.revision,
        cache=result.cache,
        timings=[
            {"name": hop.name, "ms": hop.duration_ms, "description": hop.description}
            for hop in result.timings
        ],
    )


async def chat(request: web.Request) -> web.StreamResponse:
    """One chat turn, streamed: the invoke stream's lines (`delta`, `step`, `result`) as
    NDJSON, as they come. The message fills the workflow's chat input."""
    namespace, name = _target(request)
    body = await _body(request)
    message, field = body.get("message"), body.get("input")
    if not isinstance(message, str) or not isinstance(field, str) or not field:
        raise web.HTTPBadRequest(text="send a message and the input it fills")
    client = _client(request)
    lines = client.invoke_stream(
        name, {field: message}, namespace=namespace, request_timeout=_invoke_timeout(request)
    )
    try:
        first = await anext(lines)
    except StopAsyncIteration:
        first = None
    except ClientError as error:
        return failure(error)
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    try:
        if first is not None:
            await response.write(codec.dumps(first) + b"\n")
        async for line in lines:
            await response.write(codec.dumps(line) + b"\n")
    except ClientError as error:
        problem = {"type": "error", "error": {"message": str(error)}}
        await response.write(codec.dumps(problem) + b"\n")
    await response.write_eof()
    return response


def _number(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def bench_spec(values: Mapping[str, Any]) -> dict[str, Any]:
    """The Bench's spec from the page's form: a rate makes it open-loop, `compare` (`A,B`)
    measures two revisions side by side; the API checks the rest (422 per field)."""
    spec: dict[str, Any] = {}
    duration, rate = _number(values.get("durationSeconds")), _number(values.get("rate"))
    concurrency = _number(values.get("concurrency"))
    if duration is not None:
        spec["durationSeconds"] = duration
    if rate is not None:
        spec["rate"] = rate
    elif concurrency is not None:
        spec["concurrency"] = int(concurrency)
    compare = [part.strip() for part in str(values.get("compare") or "").split(",")]
    compare = [part for part in compare if part]
    if compare:
        spec["compare"] = [int(p) if p.isdigit() else p for p in compare]
    elif values.get("revision"):
        revision = str(values["revision"])
        spec["revision"] = int(revision) if revision.isdigit() else revision
    return spec


async def bench(request: web.Request) -> web.StreamResponse:
    """Start a bench (`POST …/bench`); the page follows it from there."""
    namespace, name = _target(request)
    values = (await _body(request)).get("values")
    spec = bench_spec(values if isinstance(values, Mapping) else {})
    client = _client(request)
    path = client.object_path(names.WORKFLOWRUNS, name, namespace=namespace, subresource="bench")
    try:
        answer = (await client.request("POST", path, json={"spec": spec})).json() or {}
    except ClientError as error:
        return failure(error)
    ident = (answer.get("metadata") or {}).get("name", "")
    return _done(f"bench {ident} started")
