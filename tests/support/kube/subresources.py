"""The `status` and `scale` subresources of the workload kinds, as kube's registry serves them.

`/status` reads the whole object; a write to it (PUT, any PATCH, apply) changes only the
status (the status strategy keeps the old spec and metadata), is validated against the
kind's schema, keeps `generation`, and records ownership under `subresource: status`.
`/scale` (Deployments) reads and writes an `autoscaling/v1` Scale: `spec.replicas` from
the Deployment, `status.replicas` and the selector as text from its status; writing it
changes the Deployment's `spec.replicas` (and so its generation). No I/O here.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.kube import (
    kinds,
    resources,
    schemas,
    serverside_apply,
    statuses,
    store,
    workloads,
)

Obj = dict[str, Any]


class Subresources:
    """Handlers of `<resource>/status` and `deployments/scale` over the same store."""

    def __init__(self, api: resources.Resources) -> None:
        self.api = api
        self.store = api.store

    def _current(self, view: kinds.View, namespace: str, name: str) -> Obj:
        current = self.store.get(view.storage, namespace, name)
        if current is None:
            raise statuses.not_found(view.resource, view.group, name)
        return current

    # --- status ------------------------------------------------------------------------

    def get_status(self, view: kinds.View, namespace: str, name: str) -> Obj:
        return view.wire(self._current(view, namespace, name))

    def update_status(
        self, view: kinds.View, namespace: str, name: str, obj: Obj, *, manager: str = ""
    ) -> Obj:
        current = self._current(view, namespace, name)
        given = (obj.get("metadata") or {}).get("resourceVersion")
        if given and given != current["metadata"]["resourceVersion"]:
            raise statuses.conflict(view.resource, view.group, name)
        if (obj.get("metadata") or {}).get("name") not in (None, name):
            raise statuses.bad_request("the name of the object does not match the name on the URL")
        updated = workloads.status_strategy(obj, view.wire(current))
        updated["metadata"].pop("resourceVersion", None)
        schemas.check(updated)
        if manager:
            serverside_apply.record_update(
                updated,
                view.wire(current),
                manager=manager,
                subresource="status",
                now=store.now_rfc3339(),
            )
        return view.wire(self.store.update(view.storage, view.from_view(updated)))

    def patch_status(
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
        if media not in resources.PATCH_TYPES:
            raise statuses.unsupported_media_type(media, resources.PATCH_TYPES)
        current = view.wire(self._current(view, namespace, name))
        if media != serverside_apply.APPLY_MEDIA:
            patched = resources.patched_object(current, media, body)
            return self.update_status(view, namespace, name, patched, manager=manager)
        applied = resources.applied_configuration(view, name, body, manager=manager)
        applied = {k: v for k, v in applied.items() if k in ("apiVersion", "kind", "status")}
        applied["metadata"] = {"name": name}
        merged = serverside_apply.apply(
            current,
            applied,
            manager=manager,
            force=force,
            subresource="status",
            now=store.now_rfc3339(),
        )
        updated = workloads.status_strategy(merged, current)
        updated["metadata"]["managedFields"] = merged["metadata"].get("managedFields", [])
        updated["metadata"].pop("resourceVersion", None)
        schemas.check(updated)
        return view.wire(self.store.update(view.storage, view.from_view(updated)))

    # --- scale -------------------------------------------------------------------------

    def get_scale(self, view: kinds.View, namespace: str, name: str) -> Obj:
        return _scale(view.wire(self._current(view, namespace, name)))

    def update_scale(
        self, view: kinds.View, namespace: str, name: str, scale: Obj, *, manager: str = ""
    ) -> Obj:
        if scale.get("apiVersion") != "autoscaling/v1" or scale.get("kind") != "Scale":
            raise statuses.bad_request(
                "the body of a scale request must be an autoscaling/v1 Scale"
            )
        schemas.check(scale)
        current = view.wire(self._current(view, namespace, name))
        given = (scale.get("metadata") or {}).get("resourceVersion")
        if given and given != current["metadata"]["resourceVersion"]:
            raise statuses.conflict(view.resource, view.group, name)
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        if replicas < 0:
            raise statuses.invalid(
                "Scale",
                "autoscaling",
                name,
                [
                    statuses.field_invalid(
                        "spec.replicas", replicas, "must be greater than or equal to 0"
                    )
                ],
            )
        updated = copy.deepcopy(current)
        updated["spec"]["replicas"] = replicas
        updated["metadata"].pop("resourceVersion", None)
        return _scale(self.api.update(view, namespace, name, updated, manager=manager))

    def patch_scale(
        self,
        view: kinds.View,
        namespace: str,
        name: str,
        content_type: str,
        body: bytes,
        *,
        manager: str = "",
    ) -> Obj:
        media = content_type.split(";")[0].strip().lower()
        if media not in resources.PATCH_TYPES or media == serverside_apply.APPLY_MEDIA:
            raise statuses.unsupported_media_type(media, resources.PATCH_TYPES[:3])
        patched = resources.patched_object(self.get_scale(view, namespace, name), media, body)
        return self.update_scale(view, namespace, name, patched, manager=manager)


def _scale(deployment: Obj) -> Obj:
    meta = deployment["metadata"]
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            key: meta[key]
            for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if key in meta
        },
        "spec": {"replicas": spec.get("replicas", 0)},
        "status": {
            "replicas": status.get("replicas", 0),
            "selector": workloads.selector_text(spec.get("selector") or {}),
        },
    }
