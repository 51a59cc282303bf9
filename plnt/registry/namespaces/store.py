"""`NamespaceStore`: kube's namespace REST storage over the generic `ResourceStore`.

A namespace is held by `spec.finalizers` as well as `metadata.finalizers`:

* the first DELETE marks it (`deletionTimestamp`, `status.phase: Terminating`) and
  answers 200 with it; the namespace controller then empties it and removes the
  `kubernetes` finalizer through `finalize`;
* a DELETE while `spec.finalizers` is not empty is 409 (kube's wording), one after it
  is emptied removes the namespace;
* an update of a Terminating namespace removes it only once both finalizer lists are
  empty (kube's ShouldDeleteNamespaceDuringUpdate; `NamespaceStrategy.deletion_held`
  tells `ResourceStore.update`).

`default`, `kube-system` and `kube-public` may not be deleted (403).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterable

from plnt.api import errors
from plnt.api.meta import now_rfc3339
from plnt.registry import storageerrors
from plnt.registry.changes import Change, EventSink
from plnt.registry.namespaces.definition import DEFINITION
from plnt.registry.namespaces.strategy import (
    KUBERNETES_FINALIZER,
    TERMINATING,
    finalizing,
    spec_finalizers,
)
from plnt.registry.objects import Object
from plnt.registry.options import DeleteOptions, Warnings, WriteOptions, WriteResult
from plnt.registry.store import ResourceStore, Transform
from plnt.registry.storedobjects import decode, encode
from plnt.storage import errors as storage_errors
from plnt.storage.interface import KeyValue, Store

IMMORTAL = frozenset({"default", "kube-system", "kube-public"})
INITIAL = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Namespaces kube-apiserver creates at start; plnt does too (when missing)."""
_PURGING = (
    "The system is ensuring all content is removed from this namespace.  Upon completion, "
    "this namespace will automatically be purged by the system."
)


def _forbidden(name: str, why: str) -> errors.Forbidden:
    return errors.Forbidden(
        f'namespaces "{name}" is forbidden: {why}', name=name, group="", kind="namespaces"
    )


def _terminating(obj: Object) -> Object:
    """`obj` marked for deletion: a deletionTimestamp and phase Terminating."""
    obj["metadata"].setdefault("deletionTimestamp", now_rfc3339())
    obj["metadata"].setdefault("deletionGracePeriodSeconds", 0)
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    status["phase"] = TERMINATING
    return obj


class NamespaceStore(ResourceStore):
    """Namespaces: the generic store plus kube's deletion rules (see the module doc)."""

    def __init__(self, storage: Store, *, events: EventSink | None = None) -> None:
        super().__init__(DEFINITION, storage, events=events)

    async def update(
        self,
        namespace: str,
        name: str,
        transform: Transform,
        options: WriteOptions,
        *,
        subresource: str = "",
        applying_write: bool = False,
    ) -> WriteResult:
        """As the generic update; through `finalize` only `spec.finalizers` may change."""
        if subresource != "finalize":
            return await super().update(
                namespace,
                name,
                transform,
                options,
                subresource=subresource,
                applying_write=applying_write,
            )

        def keep_all_but_finalizers(old: Object) -> Object:
            sent = transform(copy.deepcopy(old))
            new = copy.deepcopy(old)
            if isinstance(sent, dict):
                for key in ("apiVersion", "kind"):
                    if key in sent:
                        new[key] = sent[key]
                sent_meta = sent.get("metadata")
                if isinstance(sent_meta, dict):
                    for key in ("name", "resourceVersion"):
                        if key in sent_meta:
                            new["metadata"][key] = sent_meta[key]
                sent_spec = sent.get("spec")
                finalizers = sent_spec.get("finalizers") if isinstance(sent_spec, dict) else None
                new.setdefault("spec", {})["finalizers"] = finalizers
                if finalizers is None:
                    new["spec"].pop("finalizers")
            return new

        with finalizing():
            return await super().update(
                namespace,
                name,
                keep_all_but_finalizers,
                options,
                subresource=subresource,
                applying_write=applying_write,
            )

    async def delete(
        self,
        namespace: str,
        name: str,
        options: DeleteOptions,
        *,
        warnings: Warnings | None = None,
    ) -> tuple[Object, bool]:
        """Mark Terminating, 409 while content remains, remove once finalized."""
        del namespace  # cluster-scoped
        if name in IMMORTAL:
            raise _forbidden(name, "this namespace may not be deleted")
        key = self.definition.key("", name)
        storage = self.storage
        with storageerrors.translated(self.definition, name):
            kv = await storage.get(key)
            current = decode(kv)
            self._check_preconditions(current, options)
            meta = current["metadata"]
            if meta.get("deletionTimestamp"):
                if spec_finalizers(current):
                    raise self._conflict(name, _PURGING)
                if meta.get("finalizers") or options.dry_run:
                    return current, False
                deleted = decode(await storage.delete(key, expected_revision=kv.mod_revision))
                change = Change(current, deleted, gone=True)
            elif options.dry_run:
                return _terminating(decode(kv)), False
            else:
                marked: list[Object] = []

                def mark(latest: KeyValue) -> bytes:
                    obj = decode(latest)
                    self._check_preconditions(obj, options)
                    marked[:] = [copy.deepcopy(obj)]
                    return encode(_terminating(obj))

                after = decode(await storage.guaranteed_update(key, mark))
                change = Change(marked[0], after)
        said = await self.after_write(change)
        if warnings is not None:
            warnings += said
        return change.after, change.gone

    # --- what the namespace controller and the server's start-up use ------------------

    async def ensure(self, names: Iterable[str]) -> None:
        """Create each namespace that does not exist (kube-apiserver's start-up namespaces)."""
        for name in names:
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            try:
                await self.create("", body, WriteOptions(field_manager="plnt"))
            except errors.AlreadyExists:
                continue

    async def write_status(self, name: str, change: Callable[[Object], None]) -> Object | None:
        """Apply `change` to the stored namespace (the controller's status writes); None
        when it is gone. The strategy is not involved: this is the controller's own view."""
        key = self.definition.key("", name)

        def mutate(kv: KeyValue) -> bytes | None:
            obj = decode(kv)
            before = copy.deepcopy(obj)
            change(obj)
            return None if obj == before else encode(obj)

        with (
            storageerrors.translated(self.definition, name),
            contextlib.suppress(storage_errors.KeyNotFound),
        ):
            return decode(await self.storage.guaranteed_update(key, mutate))
        return None

    async def finalize(self, name: str) -> Object | None:
        """Release the `kubernetes` finalizer, then remove the namespace if nothing else
        holds it; returns the namespace if it is still there."""

        def release(obj: Object) -> None:
            spec = obj.get("spec")
            if isinstance(spec, dict) and isinstance(spec.get("finalizers"), list):
                spec["finalizers"] = [f for f in spec["finalizers"] if f != KUBERNETES_FINALIZER]

        obj = await self.write_status(name, release)
        if obj is None or spec_finalizers(obj):
            return obj
        try:
            gone, removed = await self.delete("", name, DeleteOptions())
        except errors.NotFound:
            return None
        return None if removed else gone
