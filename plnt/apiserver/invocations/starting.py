"""Every Invocation the API server acknowledged gets its workflow; a deleted one loses it.

`InvocationHooks` is the after-write hook (`plnt.registry.hooks.AfterWrite`) the kind's
install (`install.INSTALL`) gives the Invocation store. After a create is stored, and before it is
answered, it starts the Invocation's Temporal workflow (`InvocationControl.start_invocation`,
one RPC, idempotent: the workflow id is the Invocation's namespace, name and uid). When an
Invocation leaves storage (deleted, or its last finalizer removed) it cancels that
workflow, which closes the workflow's call to the runner, and the runner cancels the
backend call.

When Temporal cannot be reached the write still stands: the hook returns a warning
(`Warning: 299 plnt "…"`) and a background loop (`plnt.apiserver.retrying.RetryLoop`)
retries with exponential backoff, starting the *latest* stored object (a pending
Invocation deleted meanwhile is forgotten) and cancelling the deleted ones. At start-up
the same loop starts every Invocation that has not finished (a create stored just before a
crash, or while Temporal was down), so a restarted API server converges; starts of
workflows that ran already change nothing.

A cancel that could not reach Temporal is remembered in memory only, so it is not what
makes deletes durable: the **sweep** is. At start-up, and on every retry pass after a
cancel or a sweep failed, the loop lists the invocation workflows Temporal runs
(`InvocationControl.running_invocations`), then the Invocations stored (a consistent
read, after the listing: a workflow is started only once its object is stored, so a
listed workflow whose object is missing was deleted, not yet unseen), and cancels every
workflow whose Invocation (namespace, name, uid: its id says them) is gone. A deleted
Invocation therefore loses its call even when its API server restarted before Temporal
was back; the state is Temporal's list and etcd's, nothing of this process. (A finalizer
would also make the cancel durable, but it would hold every delete of an Invocation until
Temporal answers, `kubectl delete` waiting on the workflow engine; the sweep leaves
delete semantics alone, and the workflow ends by itself anyway when it next finds its
Invocation gone: `plnt.sagas.invoking.activities`.)

Errors: none of its own; a failed start or cancel never fails the write.
"""

from __future__ import annotations

import logging
from typing import Any

from plnt.api import errors
from plnt.api.invocations import FINISHED_PHASES
from plnt.apiserver import retrying
from plnt.registry.changes import Change
from plnt.registry.objects import Object, lookup
from plnt.registry.options import AgentWarning, ListOptions
from plnt.registry.store import ResourceStore
from plnt.sagas.control import InvocationControl, RunningInvocation

log = logging.getLogger("plnt.apiserver.invocations")

AGENT = "plnt"

Key = tuple[str, str]
"""(namespace, name) of an Invocation."""


def _key(obj: Object) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def unfinished(obj: Object) -> bool:
    """True while the Invocation's workflow has not reported an end (start-up convergence)."""
    return lookup(obj, "status", "phase") not in FINISHED_PHASES


class InvocationHooks:
    """Starts and cancels Invocations' workflows, and retries the ones Temporal refused."""

    def __init__(
        self,
        control: InvocationControl,
        *,
        retry_initial_seconds: float = retrying.RETRY_INITIAL_SECONDS,
        retry_max_seconds: float = retrying.RETRY_MAX_SECONDS,
    ) -> None:
        self.control = control
        self.pending_starts: set[Key] = set()
        self.pending_cancels: dict[Key, Object] = {}
        self.sweep_needed = True
        """A sweep has not succeeded since start-up or since a cancel failed."""
        self._store: ResourceStore | None = None
        self._retries = retrying.RetryLoop(
            "invocation hook retries",
            converge=self.converge,
            retry=self.retry_pending,
            pending=self._pending,
            initial_seconds=retry_initial_seconds,
            max_seconds=retry_max_seconds,
        )

    async def after_write(self, change: Change) -> list[AgentWarning]:
        """Start the workflow of a new Invocation; cancel the one of a deleted Invocation."""
        if change.created:
            return await self.start(change.after)
        if change.gone:
            return await self.cancel(change.after)
        return []

    async def start(self, obj: Object) -> list[AgentWarning]:
        key = _key(obj)
        try:
            await self.control.start_invocation(obj)
        except Exception as error:  # the write is stored: never fail it
            log.warning("starting invocation %s/%s failed: %s", *key, error)
            self.pending_starts.add(key)
            self._retries.wake()
            return [
                AgentWarning(
                    AGENT,
                    f"invocation {key[1]} is stored, but its workflow could not be started "
                    f"({error}): it will start when Temporal is reachable",
                )
            ]
        self.pending_starts.discard(key)
        return []

    async def cancel(self, obj: Object) -> list[AgentWarning]:
        key = _key(obj)
        self.pending_starts.discard(key)
        try:
            await self.control.cancel_invocation(obj)
        except Exception as error:
            log.warning("cancelling invocation %s/%s failed: %s", *key, error)
            self.pending_cancels[key] = obj
            self.sweep_needed = True
            self._retries.wake()
            return [
                AgentWarning(
                    AGENT,
                    f"invocation {key[1]} is deleted, but its call could not be cancelled yet "
                    f"({error}): it will be when Temporal is reachable",
                )
            ]
        self.pending_cancels.pop(key, None)
        return []

    # --- background: start-up convergence, then retries ------------------------------

    def start_loop(self, store: ResourceStore) -> None:
        """Begin the background loop over `store` (the Invocation store)."""
        self._store = store
        self._retries.start()

    async def close(self) -> None:
        await self._retries.close()

    async def converge(self) -> None:
        """Start the workflow of every Invocation that has not finished (idempotent), then
        sweep."""
        assert self._store is not None
        page = await self._store.list("", ListOptions())
        for obj in page.items:
            if unfinished(obj) and not lookup(obj, "metadata", "deletionTimestamp"):
                await self.start(obj)
        await self.sweep()

    async def sweep(self) -> list[RunningInvocation]:
        """Cancel every running invocation workflow whose Invocation is gone (deleted, or
        recreated with another uid); the ones cancelled. Sets `sweep_needed` when Temporal
        could not be reached, clears it when the sweep went through."""
        assert self._store is not None
        try:
            running = await self.control.running_invocations()
        except Exception as error:
            log.warning("listing invocation workflows failed: %s", error)
            self.sweep_needed = True
            self._retries.wake()
            return []
        if not running:
            self.sweep_needed = False
            return []
        page = await self._store.list("", ListOptions())  # consistent, after the listing
        stored = {_key(obj): lookup(obj, "metadata", "uid") for obj in page.items}
        orphans = [
            found for found in running if stored.get((found.namespace, found.name)) != found.uid
        ]
        failed = False
        for orphan in orphans:
            log.info(
                "cancelling invocation workflow %s/%s (uid %s): its Invocation is gone",
                orphan.namespace,
                orphan.name,
                orphan.uid,
            )
            try:
                await self.control.cancel_invocation(orphan.metadata())
            except Exception as error:
                log.warning(
                    "cancelling invocation %s/%s failed: %s", orphan.namespace, orphan.name, error
                )
                failed = True
            else:
                self.pending_cancels.pop((orphan.namespace, orphan.name), None)
        self.sweep_needed = failed
        if failed:
            self._retries.wake()
        return orphans

    async def retry_pending(self) -> bool:
        """Start the latest stored object of each pending key, cancel the deleted ones;
        True when everything went through."""
        assert self._store is not None
        for namespace, name in sorted(self.pending_starts):
            try:
                obj: dict[str, Any] = await self._store.get(namespace, name)
            except errors.NotFound:
                self.pending_starts.discard((namespace, name))
                continue
            await self.start(obj)
        for gone in list(self.pending_cancels.values()):
            await self.cancel(gone)
        if self.sweep_needed:
            await self.sweep()
        return not self._pending()

    def _pending(self) -> bool:
        return bool(self.pending_starts or self.pending_cancels or self.sweep_needed)
