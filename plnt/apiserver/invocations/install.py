"""Invocation, as the composition root installs it: one `KindInstall`.

Its store gets the admission (may the requester invoke the run; the run as its owner)
and the meter that counts finishes; on a server whose sagas start Invocations
(`InvocationControl`), also the hooks that start and cancel their workflows, whose
start-up convergence and retries run in a cleanup context once storage is ready.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from plnt.apiserver import keys, kinds
from plnt.apiserver.invocations import admission, metering, starting
from plnt.apiserver.invocations import keys as invocation_keys
from plnt.registry import invocations
from plnt.registry.hooks import AfterWrite
from plnt.registry.store import ResourceStore
from plnt.sagas.control import InvocationControl


def _stores(app: web.Application) -> dict[tuple[str, str], ResourceStore]:
    return app[keys.STORES]


def _store(storing: kinds.Storing) -> ResourceStore:
    app = storing.app
    checks = admission.InvocationAdmission(
        authorizer=app[keys.AUTHORIZER], stores=lambda: _stores(app)
    )
    after: list[AfterWrite] = [app[invocation_keys.METER]]
    if (starts := app.get(invocation_keys.HOOKS)) is not None:
        after.append(starts)
    return ResourceStore(
        storing.definition,
        storing.storage,
        admission=storing.admission,
        object_admission=(checks,),
        after_write=after,
    )


def _setup(composing: kinds.Composing) -> None:
    app = composing.app
    app[invocation_keys.METER] = metering.FinishMeter(app[keys.METRICS].registry)
    if isinstance(composing.sagas, InvocationControl):
        app[invocation_keys.HOOKS] = starting.InvocationHooks(composing.sagas)


async def _starting_context(app: web.Application) -> AsyncIterator[None]:
    """Start-up convergence and retries of invocation starts (with such sagas only)."""
    hooks = app.get(invocation_keys.HOOKS)
    if hooks is None:
        yield
        return
    d = invocations.DEFINITION
    hooks.start_loop(app[keys.STORES][(d.group, d.plural)])
    try:
        yield
    finally:
        await hooks.close()


INSTALL = kinds.KindInstall(
    definition=invocations.DEFINITION,
    store=_store,
    setup=_setup,
    contexts=(metering.context, _starting_context),
)
