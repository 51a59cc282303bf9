"""The Catalog page and its Deploy action: the Workflows the server's catalog lists, and a
WorkflowRun pre-filled with a version's pinned digest.

`page` lists the namespace's Workflows (versions with their digests, what could not be
read); `deploy_page` shows the WorkflowRun manifest `plnt.api.workflows.run_manifest`
fills in (the same the CLI's `plnt catalog NAME --manifest` prints), to copy for kubectl
or to create here; `deploy` creates it with the user's client (a POST the `security`
middleware checked, answering JSON as every action does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from plnt.api import codec, workflows
from plnt.client import ClientError, PlntClient
from plnt.ui import actions, keys, rendering


@dataclass(frozen=True, slots=True)
class VersionRow:
    version: str
    tag: str
    digest: str
    short: str
    valid: bool


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    name: str
    latest: str
    description: str
    versions: list[VersionRow]
    problems: list[str]


def _client(request: web.Request) -> PlntClient:
    return request.app[keys.CLIENT]


def row(obj: dict[str, Any]) -> WorkflowRow:
    """What the Catalog page shows of one Workflow."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    status = obj.get("status") or {}
    versions = [
        VersionRow(
            str(v.get("version", "")),
            str(v.get("tag", "")),
            str(v.get("digest") or ""),
            workflows.short_digest(v.get("digest")) or "",
            bool(v.get("valid")),
        )
        for v in spec.get("versions") or []
    ]
    problems = [
        f"{e.get('tag')}: {e.get('reason')}: {e.get('message')}"
        for e in status.get("versionErrors") or []
    ]
    return WorkflowRow(
        str(meta.get("name") or ""),
        str(spec.get("latestVersion") or ""),
        str(spec.get("description") or ""),
        versions,
        problems,
    )


def source_errors(items: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for obj in items:
        for e in (obj.get("status") or {}).get("sourceErrors") or []:
            seen[f"{e.get('source')}: {e.get('reason')}: {e.get('message')}"] = None
    return list(seen)


async def page(request: web.Request) -> web.StreamResponse:
    namespace = request.match_info["namespace"]
    items = await _client(request).list_workflows(namespace=namespace)
    times = ((o.get("status") or {}).get("lastRefreshTime") for o in items)
    refreshed = next((str(t) for t in times if t), "")  # a status may not say it yet
    return rendering.page(
        request,
        "catalog.html",
        rows=[row(o) for o in items],
        source_errors=source_errors(items),
        refreshed=refreshed,
        title="Catalog",
    )


async def deploy_page(request: web.Request) -> web.StreamResponse:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    version = request.query.get("version") or None
    obj = await _client(request).get_workflow(name, namespace=namespace)
    try:
        manifest = workflows.run_manifest(obj, version=version)
        problem = ""
    except ValueError as error:
        manifest, problem = None, str(error)
    return rendering.page(
        request,
        "catalog_deploy.html",
        workflow=row(obj),
        version=version or (row(obj).latest),
        manifest=yaml.safe_dump(manifest, sort_keys=False) if manifest else "",
        body={"version": version} if version else {},
        problem=problem,
        run_name="",  # the route's name is the Workflow's, not a run's
        title=f"Deploy {name}",
    )


async def deploy(request: web.Request) -> web.StreamResponse:
    """Create the WorkflowRun of `deploy_page`'s manifest (body: {"version": …})."""
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    try:
        body = codec.loads(await request.read() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    version = body.get("version")
    client = _client(request)
    try:
        obj = await client.get_workflow(name, namespace=namespace)
        manifest = workflows.run_manifest(
            obj, version=version if isinstance(version, str) else None
        )
        created = await client.create_workflowrun(manifest, namespace=namespace)
    except ValueError as error:
        return web.json_response({"error": {"code": 422, "message": str(error)}}, status=422)
    except ClientError as error:
        return actions.failure(error)
    digest = manifest["spec"]["workflow"]["digest"]
    run = (created.get("metadata") or {}).get("name")
    return web.json_response({"message": f"WorkflowRun {run} created, pinned to {digest}"})
