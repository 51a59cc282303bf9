"""The generic resource store: Kubernetes write and read semantics over the storage protocol.

One `ResourceStore` per resource. Every write runs in one order: `admitting`'s hooks
(`before_create` or `before_update`: identity, field validation, the strategy's
prepare, validation, warnings, canonicalisation, managedFields — server-side apply
creates and updates through the same two), then the admission hooks the composition
root gave the store (`hooks.Admission`, and on create `hooks.ObjectAdmission`), then
storage. Every call into storage runs inside `storageerrors.translated`, the one place
storage errors become API errors; an object's resourceVersion is its etcd mod revision
and is never stored in the bytes themselves.

Every write that reached storage (never a dry run) ends in one step,
`after_write(change)`, whatever HTTP path asked for it: the kind's transition rules
turn the change into Events there, then the after-write hooks the composition root
gave the store run (`hooks.AfterWrite`, such as the WorkflowRun deploy hooks), and
their warnings join the write's result. So POST, PUT, PATCH, apply, `/scale`,
`/rollback` and delete cannot disagree about either.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from plnt.api import errors
from plnt.api.meta import now_rfc3339
from plnt.registry import admitting, applying, hooks, managedfields, served, storageerrors, watching
from plnt.registry.changes import Change, EventSink
from plnt.registry.definitions import ResourceDefinition
from plnt.registry.objects import Object
from plnt.registry.options import (
    DeleteOptions,
    ListOptions,
    ListPage,
    Warnings,
    WriteOptions,
    WriteResult,
    has_filters,
)
from plnt.registry.storedobjects import decode, encode, parse_resource_version
from plnt.storage import errors as storage_errors
from plnt.storage.interface import KeyValue, Store

Transform = Callable[[Object], Object]
"""Maps the stored object to the requested one (a PUT body, or a patch applied)."""

_GENERATE_NAME_ATTEMPTS = 8


def _revision(obj: Object) -> Any:
    """The served resourceVersion: unchanged after an update that wrote nothing."""
    return obj["metadata"].get("resourceVersion")


class ResourceStore:
    """Create, read, update, patch, delete and watch one resource kind."""

    def __init__(
        self,
        definition: ResourceDefinition,
        storage: Store,
        *,
        decoded_cache_size: int = 20_000,
        events: EventSink | None = None,
        admission: Sequence[hooks.Admission] = (),
        object_admission: Sequence[hooks.ObjectAdmission] = (),
        after_write: Sequence[hooks.AfterWrite] = (),
    ) -> None:
        self.definition = definition
        self.storage = storage
        self.strategy = definition.strategy
        self.events = events
        """Where the Events of the kind's transition rules go; None records none."""
        self.admission = tuple(admission)
        """Checks run before a write builds its key, in order (see `plnt.registry.hooks`)."""
        self.object_admission = tuple(object_admission)
        """Checks of a new object and who asks for it, after `admission`, before storage."""
        self.after_write_hooks = tuple(after_write)
        """What runs after each stored write, after its Events, in order."""
        self._served = served.ServedObjects(decoded_cache_size, decode)

    def read(self, kv: KeyValue) -> Object:
        """The served object of `kv`, shared between readers: callers must not mutate it.

        A key at one mod revision always decodes to the same object, so GET, LIST
        and every watcher of an event reuse one decode instead of parsing the same
        bytes again (bounded LRU, `plnt.registry.served`).
        """
        return self._served.read(kv)

    def encoded(self, obj: Object) -> bytes:
        """`obj`'s JSON answer body, encoded once per resourceVersion for a served object.

        GET writes it as is, LIST splices it among its items and a watch event wraps
        it, so all three answer the same bytes for one resourceVersion. Any other
        object (built per request) is encoded on each call, as `json.dumps` would.
        """
        return self._served.encoded(obj)

    async def after_write(self, change: Change) -> Warnings:
        """Called once after each successful write that is not a dry run, before the answer.

        Hands `change` to the Event sink, which derives the definition's transition Events
        after the answer (`EventRecorder.record_change`), then runs the after-write hooks;
        returns their warnings.
        """
        rules = self.definition.transitions
        if rules is not None and self.events is not None:
            self.events.record_change(change, rules)
        warnings: Warnings = []
        for hook in self.after_write_hooks:
            warnings += await hook.after_write(change)
        return warnings

    # --- helpers -----------------------------------------------------------------

    def _conflict(self, name: str, why: str = errors.OPTIMISTIC_LOCK_MESSAGE) -> errors.Conflict:
        return errors.Conflict.of(self.definition.group_resource, name, why)

    # --- reads ---------------------------------------------------------------------

    async def get(self, namespace: str, name: str, *, resource_version: str = "") -> Object:
        """The object; resourceVersion "0" accepts any cached state, "" reads the latest."""
        with storageerrors.translated(self.definition, name):
            kv = await self.storage.get(
                self.definition.key(namespace, name), consistent=resource_version != "0"
            )
        return self.read(kv)

    async def list(self, namespace: str, options: ListOptions) -> ListPage:
        """A page of matching objects at one revision (filters applied before `limit`)."""
        if options.continue_token and options.resource_version not in ("", "0"):
            raise errors.BadRequest(
                "specifying resource version is not allowed when using continue"
            )
        revision = 0
        if options.resource_version and options.resource_version != "0":
            requested = parse_resource_version(options.resource_version)
            if options.resource_version_match == "Exact":
                revision = requested
            else:
                await self._wait_not_older_than(requested)
        prefix = self.definition.key_prefix(namespace)
        token = options.continue_token
        items: list[Object] = []
        want = options.limit
        list_revision = revision
        while True:
            with storageerrors.translated(self.definition):
                page = await self.storage.list(
                    prefix,
                    limit=(want - len(items)) if want else 0,
                    continue_token=token,
                    revision=list_revision,
                    consistent=options.resource_version != "0",
                )
            list_revision = page.revision
            for kv in page.items:
                obj = self.read(kv)
                if self.matches(obj, options):
                    items.append(obj)
            token = page.continue_token
            if token is None or (want and len(items) >= want):
                remaining = page.remaining if not has_filters(options) else None
                return ListPage(items, str(page.revision), token, remaining)

    async def _wait_not_older_than(self, revision: int) -> None:
        with storageerrors.translated(self.definition):
            current = await self.storage.current_revision()
        if revision > current:
            raise errors.Timeout(
                f"Too large resource version: {revision}, current: {current}",
                causes=[
                    errors.Cause(
                        "ResourceVersionTooLarge",
                        f"Too large resource version: {revision}, current: {current}",
                    )
                ],
                retry_after_seconds=1,
            )

    def matches(self, obj: Object, options: ListOptions) -> bool:
        if not has_filters(options):
            return True
        if options.label_selector is not None and not options.label_selector.matches(
            obj.get("metadata", {}).get("labels") or {}
        ):
            return False
        return options.field_selector is None or options.field_selector.matches(
            self.definition.selectable_fields(obj)
        )

    def watch(self, namespace: str, options: ListOptions, **kwargs: Any) -> watching.Watch:
        """A watch stream; see `plnt.registry.watching` for the resourceVersion rules."""
        return watching.Watch(self, namespace, options, **kwargs)

    # --- writes --------------------------------------------------------------------

    async def create(
        self,
        namespace: str,
        body: Object,
        options: WriteOptions,
        *,
        applied: Sequence[managedfields.Entry] | None = None,
    ) -> WriteResult:
        """Create; `applied` are the managedFields of a create by server-side apply."""
        obj = copy.deepcopy(body)
        attempts = _GENERATE_NAME_ATTEMPTS if admitting.generates_name(obj) else 1
        obj, admitted = admitting.before_create(
            self.definition, obj, namespace=namespace, options=options, applied=applied
        )
        warnings: Warnings = [*admitted]
        meta = obj["metadata"]
        for attempt in range(attempts):
            if attempt:  # the generated name was taken: another, validated as the first was
                meta["name"] = admitting.generated_name(meta["generateName"])
            for admission in self.admission:
                await admission.admit_create(self.definition, namespace, meta["name"])
            if not attempt:
                for admitting_object in self.object_admission:
                    await admitting_object.admit_new(
                        self.definition,
                        obj,
                        requester=options.requester,
                        dry_run=options.dry_run,
                    )
            key = self.definition.key(namespace, meta["name"])
            try:
                with storageerrors.translated(self.definition, meta["name"]):
                    if options.dry_run:
                        try:
                            await self.storage.get(key)
                        except storage_errors.KeyNotFound:
                            return WriteResult(obj, created=True, warnings=warnings)
                        raise storage_errors.KeyExists("exists", key=key)
                    kv = await self.storage.create(key, encode(obj))
            except errors.AlreadyExists:
                if attempt + 1 < attempts:
                    continue
                raise
            created = decode(kv)
            warnings += await self.after_write(Change(None, created))
            return WriteResult(created, created=True, warnings=warnings)
        raise AssertionError("unreachable")  # pragma: no cover

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
        """Read-transform-write under compare-and-swap; 409 when the body's RV is stale.

        `applying_write`: the transform is a server-side apply that already set the
        object's managedFields.
        """
        for admission in self.admission:
            await admission.admit_update(self.definition, namespace, name)
        key = self.definition.key(namespace, name)
        result = WriteResult({})

        def mutate(kv: KeyValue) -> bytes | None:
            old = decode(kv)
            new, warnings = admitting.before_update(
                self.definition,
                transform(copy.deepcopy(old)),
                old,
                namespace=namespace,
                name=name,
                options=options,
                subresource=subresource,
                applying_write=applying_write,
            )
            result.warnings = [*warnings]
            result.object = new
            result.previous = old
            if new == old:
                return None
            return encode(new)

        with storageerrors.translated(self.definition, name):
            if options.dry_run:
                kv = await self.storage.get(key)
                mutate(kv)
                return result
            kv = await self.storage.guaranteed_update(key, mutate)
        stored = decode(kv)
        meta = stored["metadata"]
        gone = False
        if meta.get("deletionTimestamp") and not self.strategy.deletion_held(stored):
            # The last finalizer is gone: finish the deletion that was requested earlier
            # (unless someone else already did).
            with (
                storageerrors.translated(self.definition, name),
                contextlib.suppress(storage_errors.KeyNotFound),
            ):
                deleted = await self.storage.delete(key, expected_revision=kv.mod_revision)
                stored, gone = decode(deleted), True
        result.object = stored
        previous = result.previous
        if previous is not None and (gone or _revision(stored) != _revision(previous)):
            result.warnings += await self.after_write(Change(previous, stored, gone=gone))
        return result

    # --- server-side apply (see plnt.registry.applying) --------------------------------------

    async def apply(
        self,
        namespace: str,
        name: str,
        config: Any,
        options: WriteOptions,
        *,
        subresource: str = "",
    ) -> WriteResult:
        """Server-side apply: patch the live object, or create it (201) when it is missing."""
        d = self.definition
        config, warnings = applying.check_configuration(
            config,
            api_version=d.api_version,
            kind=d.kind,
            model=d.model,
            namespace=namespace if d.namespaced else None,
            name=name,
            field_validation=options.field_validation,
            duplicates=options.duplicates,
        )
        options = dataclasses.replace(options, duplicates=(), is_patch=True)

        def run(live: Object) -> applying.Applied:
            return applying.apply(
                live,
                config,
                entries=managedfields.decode_or_empty(live),
                manager=options.field_manager,
                api_version=d.api_version,
                model=d.model,
                now=now_rfc3339(),
                force=options.force,
                subresource=subresource,
                ignored=managedfields.ignored_fields(
                    live, config, subresource=subresource, has_status=self.strategy.has_status
                ),
            )

        def transform(live: Object) -> Object:
            result = run(live)
            managedfields.store_entries(result.object, result.entries)
            return result.object

        for _ in range(3):
            try:
                written = await self.update(
                    namespace,
                    name,
                    transform,
                    options,
                    subresource=subresource,
                    applying_write=True,
                )
            except errors.NotFound:
                if subresource:
                    raise
            else:
                written.warnings[:0] = warnings
                return written
            created = run({})
            try:
                written = await self.create(
                    namespace, created.object, options, applied=created.entries
                )
            except errors.AlreadyExists:
                continue  # created meanwhile: apply to it
            written.warnings[:0] = warnings
            return written
        raise self._conflict(name)

    async def delete(
        self,
        namespace: str,
        name: str,
        options: DeleteOptions,
        *,
        warnings: Warnings | None = None,
    ) -> tuple[Object, bool]:
        """Delete, or mark for deletion while finalizers remain; returns (object, gone).

        The after-write hooks' warnings are added to `warnings` when given (the answer's).
        """
        key = self.definition.key(namespace, name)
        before: list[Object] = []  # the state the mark was applied to (last CAS attempt)
        with storageerrors.translated(self.definition, name):
            kv = await self.storage.get(key)
            current = decode(kv)
            self._check_preconditions(current, options)
            meta = current["metadata"]
            if meta.get("finalizers"):
                if options.dry_run or meta.get("deletionTimestamp"):
                    return current, False

                def mark(latest: KeyValue) -> bytes:
                    obj = decode(latest)
                    self._check_preconditions(obj, options)
                    before[:] = [copy.deepcopy(obj)]
                    obj["metadata"].setdefault("deletionTimestamp", now_rfc3339())
                    obj["metadata"].setdefault("deletionGracePeriodSeconds", 0)
                    return encode(obj)

                after, gone = decode(await self.storage.guaranteed_update(key, mark)), False
            elif options.dry_run:
                return current, True
            else:
                deleted = await self.storage.delete(key, expected_revision=kv.mod_revision)
                before, after, gone = [current], decode(deleted), True
        said = await self.after_write(Change(before[0], after, gone=gone))
        if warnings is not None:
            warnings += said
        return after, gone

    def _check_preconditions(self, obj: Object, options: DeleteOptions) -> None:
        meta = obj["metadata"]
        name = meta.get("name", "")
        uid = options.precondition_uid
        if uid is not None and uid != meta.get("uid"):
            raise self._conflict(
                name,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                f"{meta.get('uid')}",
            )
        rv = options.precondition_resource_version
        if rv is not None and rv != meta.get("resourceVersion"):
            raise self._conflict(
                name,
                f"Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion "
                f"in object meta: {meta.get('resourceVersion')}",
            )

    async def delete_collection(
        self,
        namespace: str,
        list_options: ListOptions,
        options: DeleteOptions,
        *,
        warnings: Warnings | None = None,
    ) -> ListPage:
        """Delete every matching object; returns what was deleted (or marked).

        Each delete's after-write warnings are added to `warnings` when given.
        """
        page = await self.list(
            namespace,
            ListOptions(
                label_selector=list_options.label_selector,
                field_selector=list_options.field_selector,
            ),
        )
        deleted: list[Object] = []
        for obj in page.items:
            meta = obj["metadata"]
            try:
                gone, _ = await self.delete(
                    meta.get("namespace", ""), meta["name"], options, warnings=warnings
                )
            except errors.NotFound:
                continue
            deleted.append(gone)
        return ListPage(deleted, page.resource_version)
