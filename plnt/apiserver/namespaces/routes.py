"""The Namespace routes that are not the generic resource handler's, by serving mode.

Standalone, plnt stores real Namespaces: `POST /api/v1/namespaces` is routed to
`creating.create`, which takes kubectl's protobuf as well as JSON and YAML. Under
`plnt serve` the cluster owns Namespaces: `GET /api/v1/namespaces/{name}` answers every
name as an Active Namespace (`namespace`). Either route must be added before the generic
`/api/{tail}` route, which would otherwise take the request.
"""

from __future__ import annotations

from aiohttp import web

from plnt.apiserver import responses
from plnt.apiserver.namespaces import creating


async def namespace(request: web.Request) -> web.Response:
    """Without Namespace objects of its own (under `plnt serve`, where the cluster has
    them), every namespace exists and is Active.

    kubectl looks a namespace up after a NotFound to tell "no such namespace" from
    "no such object"; answering here keeps its message about the object. Standalone
    plnt serves real Namespaces instead (`plnt.registry.namespaces`).
    """
    name = request.match_info["name"]
    return responses.json_response(
        {
            "kind": "Namespace",
            "apiVersion": "v1",
            "metadata": {"name": name},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
    )


def add_routes(app: web.Application, *, standalone: bool) -> None:
    """Add the mode's Namespace route; call before the generic resource routes."""
    if standalone:
        app.router.add_post("/api/v1/namespaces", creating.create)
    else:
        app.router.add_get("/api/v1/namespaces/{name}", namespace)
