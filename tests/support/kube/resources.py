"""HTTP verbs on the stand-in's own kinds: get, list, watch, create, update, patch, delete.

Thin handlers over `store.Store` and a `kinds.View`, following kube-apiserver's generic
registry: typed lists whose items carry no kind/apiVersion and whose
`metadata.resourceVersion` is the store revision; watch streams of
`{"type", "object"}` lines (ADDED for the current state when no resourceVersion or
"0" is given, exactly the changes after a given resourceVersion otherwise, and
`sendInitialEvents=true` closed by the `k8s.io/initial-events-end` BOOKMARK);
server-side fields (uid, creationTimestamp, resourceVersion) set by storage;
optimistic concurrency on a given resourceVersion; NamespaceLifecycle admission (no
writes into a namespace that does not exist); every accepted object validated against
its real schema (`schemas`) and kube's own rules (`View.checks`).

Each view's strategy (`View.prepare`: defaults, status kept or dropped, generation) runs
before validation; every write records field ownership in `metadata.managedFields`, and
`application/apply-patch+yaml` is server-side apply (`serverside_apply`); strategic merge
patches merge lists by the merge keys of the real schemas (`strategic`). The `status` and
`scale` subresources are in `subresources`.

Approximations: a list returns everything at once (no `continue`); Events and Namespaces
keep no managedFields; dryRun is not supported.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from typing import Any

import json_merge_patch
import jsonpatch
import yaml
from aiohttp import web

from tests.support.kube import (
    kinds,
    schemas,
    selectors,
    serverside_apply,
    statuses,
    store,
    strategic,
    tables,
)

Obj = dict[str, Any]
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    serverside_apply.APPLY_MEDIA,
)
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Resources:
    """The handlers of every view in `kinds.VIEWS`, over one store."""

    def __init__(self, storage: store.Store) -> None:
        self.store = storage

    # --- reads ------------------------------------------------------------------------

    def get(self, view: kinds.View, namespace: str, name: str) -> Obj:
        stored = self.store.get(view.storage, namespace, name)
        if stored is None:
            raise statuses.not_found(view.resource, view.group, name)
        return view.wire(stored)

    def _matcher(self, view: kinds.View, query: Any) -> Callable[[Obj], bool]:
        fields = selectors.field_matcher(
            query.get("fieldSelector", ""),
            view.field_labels,
            view.stored_field,  # type: ignore[arg-type]
        )
        labels = selectors.label_matcher(query.get("labelSelector", ""))
        return lambda stored: fields(stored) and labels(stored)

    def list(self, view: kinds.View, namespace: str, query: Any, accept: str) -> Obj:
        matches = self._matcher(view, query)
        items = [view.wire(s) for s in self.store.list(view.storage, namespace) if matches(s)]
        revision = str(self.store.revision)
        if tables.wants_table(accept):
            return tables.table(view, items, revision)
        for item in items:
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return {
            "kind": f"{view.kind}List",
            "apiVersion": view.api_version,
            "metadata": {"resourceVersion": revision},
            "items": items,
        }

    async def watch(
        self, request: web.Request, view: kinds.View, namespace: str
    ) -> web.StreamResponse:
        query = request.query
        matches = self._matcher(view, query)
        send_initial = query.get("sendInitialEvents", "").lower() == "true"
        bookmarks = query.get("allowWatchBookmarks", "").lower() == "true"
        if send_initial and (not bookmarks or query.get("resourceVersionMatch") != "NotOlderThan"):
            raise statuses.invalid(
                "ListOptions", "meta.k8s.io", "",
                [statuses.field_invalid("sendInitialEvents", True, "sendInitialEvents requires "
                 "setting allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan")],
            )  # fmt: skip
        rv = query.get("resourceVersion", "")
        in_namespace = lambda s: not namespace or s["metadata"].get("namespace") == namespace  # noqa: E731
        # No await between the snapshot and opening the watch: nothing can slip between.
        lines: list[Obj] = []
        if send_initial or rv in ("", "0"):
            for stored in self.store.list(view.storage, namespace):
                if matches(stored):
                    lines.append({"type": "ADDED", "object": view.wire(stored)})
        else:
            for change in self.store.changes_since(view.storage, int(rv)):
                if in_namespace(change.object) and matches(change.object):
                    lines.append({"type": change.type, "object": view.wire(change.object)})
        if send_initial:
            lines.append(self._bookmark(view, initial_end=True))
        watcher = self.store.open_watch(view.storage)
        response = web.StreamResponse(
            headers={"Content-Type": statuses.JSON, "Cache-Control": "no-cache, private"}
        )
        try:
            await response.prepare(request)
            for line in lines:
                await response.write(json.dumps(line).encode() + b"\n")
            timeout = float(query.get("timeoutSeconds", "1800") or 1800)
            async with asyncio.timeout(timeout):
                while True:
                    change = await watcher.queue.get()
                    if in_namespace(change.object) and matches(change.object):
                        line = {"type": change.type, "object": view.wire(change.object)}
                        await response.write(json.dumps(line).encode() + b"\n")
        except (TimeoutError, ConnectionResetError):
            pass
        finally:
            self.store.close_watch(watcher)
        return response

    def _bookmark(self, view: kinds.View, *, initial_end: bool) -> Obj:
        metadata: Obj = {"resourceVersion": str(self.store.revision)}
        if initial_end:
            metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {
            "type": "BOOKMARK",
            "object": {"kind": view.kind, "apiVersion": view.api_version, "metadata": metadata},
        }

    # --- writes -----------------------------------------------------------------------

    def _admit(self, view: kinds.View, namespace: str, obj: Obj, old: Obj | None) -> Obj:
        """Schema, identity and kube's validation; the stored form on success."""
        if obj.get("apiVersion") != view.api_version or obj.get("kind") != view.kind:
            raise statuses.bad_request(
                f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                f"expected API version ({view.api_version})"
                if obj.get("apiVersion") != view.api_version
                else f"the kind in the data ({obj.get('kind')}) "
                f"does not match the expected kind ({view.kind})"
            )
        meta = obj.setdefault("metadata", {})
        if view.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise statuses.bad_request(
                    "the namespace of the provided object does not match "
                    "the namespace sent on the request"
                )
            meta["namespace"] = namespace
        schemas.check(obj)
        stored = view.from_view(obj)
        view.prepare(stored, old)
        causes = view.checks(stored, old)
        if causes:
            raise statuses.invalid(view.kind, view.group, meta.get("name", ""), causes)
        return stored

    def _namespace_must_exist(self, view: kinds.View, namespace: str) -> None:
        if view.namespaced and self.store.get("namespaces", "", namespace) is None:
            raise statuses.not_found("namespaces", "", namespace)

    def _own(self, view: kinds.View, stored: Obj, old: Obj | None, manager: str) -> None:
        """Record `manager`'s changes in managedFields (the stored form is the wire form)."""
        if view.storage in ("events", "namespaces") or not manager:
            return
        stored["kind"], stored["apiVersion"] = view.kind, view.api_version
        serverside_apply.record_update(stored, old, manager=manager, now=store.now_rfc3339())

    def create(
        self, view: kinds.View, namespace: str, obj: Obj, *, manager: str = "", owned: bool = False
    ) -> Obj:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if not meta.get("name"):
            raise statuses.invalid(
                view.kind, view.group, "",
                [statuses.field_required("metadata.name", "name or generateName is required")],
            )  # fmt: skip
        if meta.get("resourceVersion"):
            raise statuses.bad_request("resourceVersion should not be set on objects to be created")
        self._namespace_must_exist(view, namespace)
        stored = self._admit(view, namespace, obj, None)
        if not owned:
            self._own(view, stored, None, manager)
        try:
            return view.wire(self.store.create(view.storage, stored))
        except KeyError:
            raise statuses.already_exists(view.resource, view.group, meta["name"]) from None

    def update(
        self,
        view: kinds.View,
        namespace: str,
        name: str,
        obj: Obj,
        *,
        manager: str = "",
        owned: bool = False,
    ) -> Obj:
        current = self.store.get(view.storage, namespace, name)
        if current is None:
            raise statuses.not_found(view.resource, view.group, name)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") != name:
            raise statuses.bad_request("the name of the object does not match the name on the URL")
        given = meta.get("resourceVersion")
        if given and given != current["metadata"]["resourceVersion"]:
            raise statuses.conflict(view.resource, view.group, name)
        for key in ("uid", "creationTimestamp"):
            meta[key] = current["metadata"][key]
        stored = self._admit(view, namespace, obj, current)
        if owned:
            stored["metadata"]["managedFields"] = meta.get("managedFields") or []
        else:
            stored["metadata"].pop("managedFields", None)
            if current["metadata"].get("managedFields"):
                stored["metadata"]["managedFields"] = current["metadata"]["managedFields"]
            self._own(view, stored, current, manager)
        if not stored["metadata"].get("managedFields"):
            stored["metadata"].pop("managedFields", None)
        stored["metadata"].pop("resourceVersion", None)
        return view.wire(self.store.update(view.storage, stored))

    def patch(
        self,
        view: kinds.View,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes,
        *,
        manager: str = "",
        force: bool = False,
    ) -> Obj:
        media = content_type.split(";")[0].strip().lower()
        if media not in PATCH_TYPES:
            raise statuses.unsupported_media_type(media, PATCH_TYPES)
        current = self.store.get(view.storage, namespace, name)
        if media == serverside_apply.APPLY_MEDIA:
            return self._apply(view, namespace, name, current, body, manager=manager, force=force)
        if current is None:
            raise statuses.not_found(view.resource, view.group, name)
        patched = patched_object(view.wire(current), media, body)
        return self.update(view, namespace, name, patched, manager=manager)

    def _apply(
        self,
        view: kinds.View,
        namespace: str,
        name: str,
        current: Obj | None,
        body: bytes,
        *,
        manager: str,
        force: bool,
    ) -> Obj:
        applied = applied_configuration(view, name, body, manager=manager)
        merged = serverside_apply.apply(
            view.wire(current) if current is not None else None,
            applied,
            manager=manager,
            force=force,
            now=store.now_rfc3339(),
        )
        if current is None:
            return self.create(view, namespace, merged, owned=True)
        merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self.update(view, namespace, name, merged, owned=True)

    def delete(self, view: kinds.View, namespace: str, name: str) -> Obj:
        if self.store.get(view.storage, namespace, name) is None:
            raise statuses.not_found(view.resource, view.group, name)
        gone = self.store.delete(view.storage, namespace, name)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": name,
                "group": view.group,
                "kind": view.resource,
                "uid": gone["metadata"]["uid"],
            },
        }


def patched_object(original: Obj, media: str, body: bytes) -> Obj:
    """`original` with a JSON, merge or strategic merge patch applied (422 when it fails)."""
    try:
        patch = json.loads(body)
        if media == "application/json-patch+json":
            return dict(jsonpatch.apply_patch(original, patch))
        if not isinstance(patch, dict):
            raise ValueError("a merge patch must be a JSON object")
        if media == "application/strategic-merge-patch+json":
            return dict(strategic.apply(original, patch))
        return dict(json_merge_patch.merge(original, patch))
    except (ValueError, jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        raise statuses.StatusError(
            422,
            "Invalid",
            f"the server rejected our request due to an error in our request: {error}",
        ) from error


def applied_configuration(view: kinds.View, name: str, body: bytes, *, manager: str) -> Obj:
    """The body of an apply patch, checked as kube checks it before merging."""
    if not manager:
        raise statuses.invalid(
            "PatchOptions", "meta.k8s.io", "",
            [statuses.field_required("fieldManager", "is required for apply patch")],
        )  # fmt: skip
    try:
        applied = yaml.safe_load(body)
    except yaml.YAMLError as error:
        raise statuses.bad_request(f"error decoding YAML: {error}") from error
    if not isinstance(applied, dict):
        raise statuses.bad_request("the body of an apply patch must be an object")
    if applied.get("apiVersion") != view.api_version or applied.get("kind") != view.kind:
        raise statuses.bad_request(
            f"the API version in the data ({applied.get('apiVersion')}) does not match the "
            f"expected API version ({view.api_version})"
            if applied.get("apiVersion") != view.api_version
            else f"the kind in the data ({applied.get('kind')}) does not match the expected "
            f"kind ({view.kind})"
        )
    meta = applied.get("metadata") or {}
    if meta.get("name") not in (None, name):
        raise statuses.bad_request("the name of the object does not match the name on the URL")
    applied.setdefault("metadata", {})["name"] = name
    return applied
