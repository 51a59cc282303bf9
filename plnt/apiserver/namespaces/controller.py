"""The namespace controller of standalone plnt, and its start-up.

kube-controller-manager's namespace controller, in-process: when a Namespace is
marked for deletion (Terminating), it deletes everything in it through each store's
normal delete path — so a WorkflowRun's deploy hooks start its teardown saga and the
run's `plnt.work/teardown` finalizer holds the namespace until its runners are gone —
records kube's deletion conditions on the namespace as it goes, and once nothing is
left releases the `kubernetes` finalizer, which removes the namespace.

At start the namespaces kube-apiserver creates (`default`, `kube-system`,
`kube-public`, `kube-node-lease`) are created when missing, and so is every namespace
that already holds objects (a state directory from before plnt served Namespaces).

A controller pass that finds content remaining is retried with a backoff (as kube
requeues it); a watch of Namespaces starts a pass for each one marked for deletion.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from aiohttp import web

from plnt.api import errors
from plnt.api.meta import now_rfc3339
from plnt.apiserver import keys
from plnt.processes import tasks
from plnt.registry import coreevents, namespaces
from plnt.registry.definitions import Object
from plnt.registry.namespaces.strategy import spec_finalizers
from plnt.registry.options import DeleteOptions, ListOptions
from plnt.registry.store import ResourceStore

log = logging.getLogger("plnt.namespaces")

_CONDITIONS = (
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    ("NamespaceFinalizersRemaining", "ContentRemoved", "All content successfully removed"),
)
"""kube's namespace conditions in its order, with the reason and message of their False state."""


@dataclass
class _Pass:
    """What one deletion pass over a namespace found."""

    failures: list[str] = field(default_factory=list)
    remaining: Counter[str] = field(default_factory=Counter)
    finalizers: Counter[str] = field(default_factory=Counter)

    @property
    def done(self) -> bool:
        return not self.failures and not self.remaining

    def conditions(self) -> dict[str, tuple[str, str, str]]:
        """type → (status, reason, message), as kube's namespaceConditionUpdater words them."""
        out = {kind: ("False", reason, message) for kind, reason, message in _CONDITIONS}
        if self.failures:
            out["NamespaceDeletionContentFailure"] = (
                "True",
                "ContentDeletionFailed",
                f"Failed to delete all resource types, {len(self.failures)} remaining: "
                + ", ".join(sorted(self.failures)),
            )
        if self.remaining:
            listed = sorted(f"{r} has {n} resource instances" for r, n in self.remaining.items())
            out["NamespaceContentRemaining"] = (
                "True",
                "SomeResourcesRemain",
                "Some resources are remaining: " + ", ".join(listed),
            )
        if self.finalizers:
            listed = sorted(f"{f} in {n} resource instances" for f, n in self.finalizers.items())
            out["NamespaceFinalizersRemaining"] = (
                "True",
                "SomeFinalizerRemain",
                "Some finalizers are remaining: " + ", ".join(listed),
            )
        return out


def _apply_conditions(obj: Object, wanted: dict[str, tuple[str, str, str]]) -> None:
    """Set the five conditions; a transition time changes only with the status."""
    status = obj.setdefault("status", {})
    conditions: list[Object] = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    now = now_rfc3339()
    for kind, _, _ in _CONDITIONS:
        state, reason, message = wanted[kind]
        current = next((c for c in conditions if c.get("type") == kind), None)
        if current is None:
            conditions.append(
                {
                    "type": kind,
                    "status": state,
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }
            )
            continue
        if current.get("status") != state:
            current["lastTransitionTime"] = now
        current.update(status=state, reason=reason, message=message)
    status["conditions"] = conditions


class NamespaceController:
    """Empties Terminating namespaces and releases them (see the module docstring)."""

    def __init__(
        self,
        namespace_store: namespaces.NamespaceStore,
        content: Sequence[ResourceStore],
        *,
        first_retry: float = 0.1,
        longest_retry: float = 2.0,
    ) -> None:
        self._namespaces = namespace_store
        # Events last: deleting the rest records Events until it is done.
        self._content = sorted(content, key=lambda s: s.definition is coreevents.DEFINITION)
        self._first_retry = first_retry
        self._longest_retry = longest_retry
        self._passes: dict[str, asyncio.Task[None]] = {}

    async def adopt_existing(self) -> None:
        """Create kube's start-up namespaces and every namespace already holding objects."""
        held: set[str] = set()
        for store in self._content:
            page = await store.list("", ListOptions(resource_version="0"))
            held.update(str(o["metadata"].get("namespace") or "") for o in page.items)
        held.discard("")
        await self._namespaces.ensure([*namespaces.INITIAL, *sorted(held)])

    async def run(self) -> None:
        """Watch Namespaces and start a deletion pass for each one marked; until cancelled."""
        try:
            while True:
                try:
                    async with self._namespaces.watch("", ListOptions()) as stream:
                        async for kind, obj in stream:
                            if kind in ("ADDED", "MODIFIED") and obj["metadata"].get(
                                "deletionTimestamp"
                            ):
                                self._start(obj["metadata"]["name"])
                except errors.APIError as error:
                    log.warning("namespace watch ended: %s", error)
                await asyncio.sleep(self._longest_retry)  # then watch again from scratch
        finally:
            await tasks.stop(*self._passes.values())

    def _start(self, name: str) -> None:
        running = self._passes.get(name)
        if running is not None and not running.done():
            return
        self._passes[name] = asyncio.create_task(self._delete(name), name=f"namespace {name}")

    async def _delete(self, name: str) -> None:
        """Passes over `name` until it is gone or no longer waits for this controller."""
        delay = self._first_retry
        while True:
            try:
                if await self._one_pass(name):
                    return
            except errors.APIError as error:
                log.warning("namespace %s: deletion pass failed: %s", name, error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._longest_retry)

    async def _one_pass(self, name: str) -> bool:
        """One pass; True when there is nothing more for this controller to do."""
        try:
            ns = await self._namespaces.get("", name)
        except errors.NotFound:
            return True
        if not ns["metadata"].get("deletionTimestamp"):
            return True
        if namespaces.KUBERNETES_FINALIZER not in spec_finalizers(ns):
            if not spec_finalizers(ns):
                await self._namespaces.finalize(name)
            return True
        found = await self._delete_content(name)
        wanted = found.conditions()
        await self._namespaces.write_status(name, lambda obj: _apply_conditions(obj, wanted))
        if not found.done:
            return False
        await self._namespaces.finalize(name)
        return True

    async def _delete_content(self, name: str) -> _Pass:
        """Delete every object in `name` not yet being deleted, then count what is left."""
        found = _Pass()
        for store in self._content:
            d = store.definition
            resource = f"{d.plural}.{d.group}"
            try:
                for obj in (await store.list(name, ListOptions())).items:
                    if obj["metadata"].get("deletionTimestamp"):
                        continue
                    with contextlib.suppress(errors.NotFound):
                        await store.delete(name, obj["metadata"]["name"], DeleteOptions())
                left = (await store.list(name, ListOptions())).items
            except errors.APIError as error:
                found.failures.append(f"{resource}: {error}")
                continue
            if left:
                found.remaining[resource] = len(left)
            for obj in left:
                found.finalizers.update(obj["metadata"].get("finalizers") or [])
        return found


async def controller_context(app: web.Application) -> AsyncIterator[None]:
    """Start-up namespaces, then the controller for as long as the server runs; nothing
    where plnt serves no Namespaces (under `plnt serve` the cluster's controller works)."""
    stores = app[keys.STORES]
    namespace_store = stores.get((namespaces.DEFINITION.group, namespaces.DEFINITION.plural))
    if namespace_store is None:
        yield
        return
    assert isinstance(namespace_store, namespaces.NamespaceStore)
    content = [
        store
        for store in stores.values()
        if store.definition.namespaced and "delete" in store.definition.verbs
    ]
    controller = NamespaceController(namespace_store, content)
    await controller.adopt_existing()
    async with tasks.running(controller.run(), name="namespace controller"):
        yield
