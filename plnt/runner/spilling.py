"""Spill-over: a call the API server spills is served by another backend of the run's pool.

The API server holds each run's live attainment of its objectives (`spec.slo`,
`status.slo`), so it decides when a call spills and to which backend of the pool
(`plnt.apiserver.workflowruns.spilling`); the runner makes the backend calls, so it
carries the decision out. A spilled call arrives with `X-Plnt-Spill-To: NAME`
(`plnt.api.headers.SPILL_HEADER`). The runner obeys only a name its backend configuration
lists in `spillover` (the pool's other backends when it was deployed, with their endpoints
and models): a header never makes a runner call an endpoint it was not deployed with, nor
send its own backend's credentials anywhere else (a spill backend is one that takes none).
An unknown name is ignored and the primary serves the call.

The answer to an obeyed call carries the same header, set before it is sent (streamed or
not), so the API server counts a spill only when one happened: a runner deployed without
the pool (or by a target that does not pass it) never answers it.

How it reaches the backend call: the middleware sets a context variable for the request,
which the tasks the handler starts inherit; `SpillingBackend`, the runner's backend when
its configuration lists any spill backend, reads it on every call. The guard
(`plnt.runner.guarding.guard`: admission, a breaker, a fallback) wraps this one, so a
spilled call is held to the same guard as any other call.

No errors of its own: a spill backend fails as any backend does (`backends.BackendError`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping

import aiohttp
from aiohttp import web

from plnt.api.headers import SPILL_HEADER
from plnt.runner import backends, settings

SPILL_TO: contextvars.ContextVar[str | None] = contextvars.ContextVar("spill_to", default=None)
"""The spill backend the current call goes to (None: the primary)."""
_SPILLED = web.RequestKey("spilled", str)


class SpillingBackend:
    """The primary backend, or for a spilled call the spill backend it names."""

    def __init__(
        self, primary: backends.Backend, spillover: Mapping[str, backends.Backend]
    ) -> None:
        self.primary = primary
        self.spillover = dict(spillover)

    def _current(self) -> backends.Backend:
        name = SPILL_TO.get()
        return self.spillover.get(name, self.primary) if name else self.primary

    async def chat(
        self, request: backends.ChatRequest, *, on_delta: backends.DeltaListener | None = None
    ) -> backends.Reply:
        """The chat reply of the backend this call goes to."""
        return await self._current().chat(request, on_delta=on_delta)

    async def complete(
        self,
        request: backends.CompletionRequest,
        *,
        on_delta: backends.DeltaListener | None = None,
    ) -> backends.Reply:
        """The completion of the backend this call goes to."""
        return await self._current().complete(request, on_delta=on_delta)


def backend_of(
    config: settings.BackendConfig, *, session: aiohttp.ClientSession
) -> backends.Backend:
    """The runner's backend: the configured one, able to spill when `spillover` lists any."""
    primary = backends.make_backend(config, session=session)
    if not config.spillover:
        return primary
    return SpillingBackend(
        primary,
        {
            name: backends.make_backend(spill, session=session)
            for name, spill in config.spillover.items()
        },
    )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def install(app: web.Application, config: settings.BackendConfig) -> None:
    """Obey `X-Plnt-Spill-To` for the names `config.spillover` lists (module docstring)."""
    names = frozenset(config.spillover)
    if not names:
        return

    @web.middleware
    async def spill(request: web.Request, handler: Handler) -> web.StreamResponse:
        name = request.headers.get(SPILL_HEADER)
        if name not in names:
            return await handler(request)
        request[_SPILLED] = name
        token = SPILL_TO.set(name)
        try:
            return await handler(request)
        finally:
            SPILL_TO.reset(token)

    async def say_so(request: web.Request, response: web.StreamResponse) -> None:
        name = request.get(_SPILLED)
        if name is not None:
            response.headers[SPILL_HEADER] = name

    app.middlewares.append(spill)
    app.on_response_prepare.append(say_so)
