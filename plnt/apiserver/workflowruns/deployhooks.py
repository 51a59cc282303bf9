"""Deploy hooks: every accepted change of a WorkflowRun's desired state reaches its saga.

The saga must never miss a write the API server acknowledged, so the hook runs inside the
write's request, after storage accepted it and before the answer goes out. Writes that
call it (none under dry-run): creation, a new `metadata.generation` (spec edits by update,
patch, apply or `/scale`), and the start of a deletion (deletionTimestamp newly set).
Status writes and metadata-only edits (labels, annotations) do not change the desired
state, so they are not submitted.

`DeployHooks` is an after-write hook (`plnt.registry.hooks.AfterWrite`) the kind's
install (`install.INSTALL`) gives the WorkflowRun `ResourceStore`; the store runs it
after the write's Events on every path that stores (create, update, patch, server-side
apply, scale, delete, deletecollection, rollback), so none can forget it.

When the saga service is down (`DeployUnavailable`) the write still stands: the hook
returns a warning (agent `plnt`) that the store adds to the write's result, so the answer
gets a `Warning: 299 plnt "…"` header, and the key goes to a retry loop with exponential
backoff (`plnt.apiserver.retrying.RetryLoop`) that resubmits the *latest* stored object.
The same loop first resubmits, at start-up, every run whose `status.observedGeneration`
lags `metadata.generation` or that is being deleted, so a restart of the API server
converges.

Errors: none of its own. `DeployUnavailable` (and any other failure of `submit`, which
is logged) never fails the write; it becomes a warning and a retry.
"""

from __future__ import annotations

import logging
from typing import Any

from plnt.api import errors
from plnt.api.runs import RunKey
from plnt.apiserver import retrying
from plnt.registry.changes import Change, generation
from plnt.registry.definitions import Object
from plnt.registry.options import AgentWarning, ListOptions
from plnt.registry.store import ResourceStore
from plnt.sagas.control import DeployControl, DeployUnavailable

log = logging.getLogger("plnt.apiserver.deploy")

AGENT = "plnt"
"""The agent of the deploy warnings (`Warning: 299 plnt "…"`)."""


def _meta(obj: Object | None) -> dict[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def needs_deploy(obj: Object) -> bool:
    """True when the saga has not caught up with `obj` (start-up convergence)."""
    status = obj.get("status") or {}
    observed = status.get("observedGeneration") if isinstance(status, dict) else None
    return bool(_meta(obj).get("deletionTimestamp")) or observed != generation(obj)


class DeployHooks:
    """Submits WorkflowRuns to a `DeployControl`, and retries the ones it could not."""

    def __init__(
        self,
        deploy: DeployControl,
        *,
        retry_initial_seconds: float = retrying.RETRY_INITIAL_SECONDS,
        retry_max_seconds: float = retrying.RETRY_MAX_SECONDS,
    ) -> None:
        self.deploy = deploy
        self.pending: set[RunKey] = set()
        self._store: ResourceStore | None = None
        self._retries = retrying.RetryLoop(
            "deploy hook retries",
            converge=self.converge,
            retry=self.retry_pending,
            pending=lambda: bool(self.pending),
            initial_seconds=retry_initial_seconds,
            max_seconds=retry_max_seconds,
        )

    async def after_write(self, change: Change) -> list[AgentWarning]:
        """Submit what the saga must see: a creation, a new generation, a deletion started.

        Runs inside the write's request, after its Events; the answer waits for it.
        """
        if change.created or change.generation_changed or change.deletion_started:
            return await self.submit(change.after)
        return []

    async def submit(self, obj: Object) -> list[AgentWarning]:
        """Submit `obj`; on failure remember it for the retry loop and return the warning
        for the request that wrote it."""
        meta = _meta(obj)
        key = RunKey(str(meta.get("namespace", "")), str(meta.get("name", "")))
        try:
            await self.deploy.submit(obj)
        except Exception as error:  # the write is stored: never fail it
            if not isinstance(error, DeployUnavailable):
                log.exception("deploy submit of %s/%s failed", key.namespace, key.name)
            self.pending.add(key)
            self._retries.wake()
            return [
                AgentWarning(
                    AGENT,
                    f"workflowrun {key.name} is stored, but its deploy could not be started "
                    f"({error}): the deploy will start when Temporal is reachable",
                )
            ]
        self.pending.discard(key)
        return []

    # --- background: start-up convergence, then retries ------------------------------

    def start(self, store: ResourceStore) -> None:
        """Begin the background loop over `store` (the WorkflowRun store)."""
        self._store = store
        self._retries.start()

    async def close(self) -> None:
        await self._retries.close()

    async def converge(self) -> None:
        """Submit every run the saga has not caught up with (after a restart)."""
        assert self._store is not None
        page = await self._store.list("", ListOptions())
        for obj in page.items:
            if needs_deploy(obj):
                await self.submit(obj)

    async def retry_pending(self) -> bool:
        """Resubmit the latest stored object of each pending key; True when all went through."""
        assert self._store is not None
        for key in sorted(self.pending):
            try:
                obj = await self._store.get(key.namespace, key.name)
            except errors.NotFound:
                self.pending.discard(key)
                continue
            await self.submit(obj)
        return not self.pending
