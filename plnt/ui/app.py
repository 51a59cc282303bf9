"""The UI server's composition root: routes, middlewares, the client's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from plnt.client import ApiError, ClientError, PlntClient
from plnt.ui import actions, catalog, keys, live, pages, rendering, security
from plnt.ui.security import Handler
from plnt.ui.settings import UiSettings

STATIC = Path(__file__).parent / "static"


@web.middleware
async def errors_as_pages(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A page the API refused is a page saying so, in the API's words, with its status."""
    try:
        return await handler(request)
    except ApiError as error:
        return rendering.error_page(request, error.code, error.reason or "Error", error.message)
    except ClientError as error:
        return rendering.error_page(request, 502, "The API cannot be reached", str(error))


def build_app(settings: UiSettings, client: PlntClient) -> web.Application:
    """The app for one launch; `client` is closed with it."""
    app = web.Application(middlewares=[security.guard, errors_as_pages])
    app[keys.SETTINGS] = settings
    app[keys.CLIENT] = client
    app[keys.TEMPLATES] = rendering.environment()

    async def client_context(app: web.Application) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await app[keys.CLIENT].close()

    app.cleanup_ctx.append(client_context)
    run = "/ns/{namespace}/runs/{name}"
    routes = app.router
    routes.add_get("/", pages.index)
    routes.add_get("/ns/{namespace}/runs", pages.runs)
    routes.add_get(run, pages.run)
    routes.add_get(run + "/invocations", pages.invocations)
    routes.add_get(run + "/invoke", pages.invoke)
    routes.add_get(run + "/bench", pages.bench)
    routes.add_get("/ns/{namespace}/backends", pages.backends)
    routes.add_get("/ns/{namespace}/invocations/{invocation}", pages.invocation)
    routes.add_get("/ns/{namespace}/catalog", catalog.page)
    routes.add_get("/ns/{namespace}/catalog/{name}/deploy", catalog.deploy_page)
    routes.add_post("/act/ns/{namespace}/catalog/{name}/deploy", catalog.deploy)
    routes.add_get("/live/ns/{namespace}/runs", live.runs)
    routes.add_get("/live" + run, live.run)
    routes.add_get("/live" + run + "/invocations", live.invocations)
    routes.add_get("/live" + run + "/bench", live.bench)
    routes.add_get("/live/ns/{namespace}/backends", live.backends)
    routes.add_get("/live/ns/{namespace}/invocations/{invocation}", live.invocation)
    routes.add_post("/act" + run + "/rollback", actions.rollback)
    routes.add_post("/act" + run + "/promote", actions.promote)
    routes.add_post("/act" + run + "/abort", actions.abort)
    routes.add_post("/act" + run + "/backend", actions.backend)
    routes.add_post("/act" + run + "/invoke", actions.invoke)
    routes.add_post("/act" + run + "/chat", actions.chat)
    routes.add_post("/act" + run + "/bench", actions.bench)
    routes.add_static("/static/", STATIC, append_version=True)
    return app
