"""WorkflowRun, as the composition root installs it: one `KindInstall`.

With sagas, the store gets the deploy hooks (an after-write hook on every stored write)
and new runs the teardown finalizer; without, it is the generic store. The runtime's
state (the runners' session and balancer, the shadower, the bench gauges, the deploy
retries) lives in this package's AppKeys and cleanup contexts, in the order they must
start: the session before the shadow senders that use it (stopped after them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import Counter

from plnt.apiserver import keys, kinds
from plnt.apiserver.workflowruns import (
    benchgauges,
    deployhooks,
    invoke,
    mirroring,
    routes,
    sharing,
    slostatus,
)
from plnt.apiserver.workflowruns import keys as run_keys
from plnt.registry import workflowruns
from plnt.registry.store import ResourceStore


def _store(storing: kinds.Storing) -> ResourceStore:
    hooks = storing.app.get(run_keys.DEPLOY_HOOKS)
    if hooks is None:
        return kinds.plain_store(storing)
    definition = workflowruns.with_teardown(
        standalone=storing.standalone, signatures=storing.app[keys.SETTINGS].signatures
    )
    return ResourceStore(
        definition, storing.storage, admission=storing.admission, after_write=(hooks,)
    )


def _setup(composing: kinds.Composing) -> None:
    app = composing.app
    app[run_keys.DEPLOY] = composing.sagas
    if composing.sagas is not None:
        app[run_keys.DEPLOY_HOOKS] = deployhooks.DeployHooks(composing.sagas)
    app[run_keys.SHADOW_DROPPED] = Counter(
        "plnt_apiserver_shadow_dropped",
        "Live invocations not mirrored to a canary under shadow because its queue was full.",
        registry=app[keys.METRICS].registry,
    )


async def _deploy_context(app: web.Application) -> AsyncIterator[None]:
    """Start-up convergence and retries of deploy submissions (with sagas only)."""
    hooks = app.get(run_keys.DEPLOY_HOOKS)
    if hooks is None:
        yield
        return
    d = workflowruns.DEFINITION
    hooks.start(app[keys.STORES][(d.group, d.plural)])
    try:
        yield
    finally:
        await hooks.close()


INSTALL = kinds.KindInstall(
    definition=workflowruns.DEFINITION,
    store=_store,
    subresources=routes.SUBRESOURCES,
    setup=_setup,
    contexts=(
        benchgauges.context,
        _deploy_context,
        invoke.upstream_context,
        slostatus.context,  # after the invoker: judges its calls
        mirroring.context,  # after the session: stopped before it closes
    ),
    streams=sharing.register,
)
