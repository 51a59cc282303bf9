"""The `scale` subresource of WorkflowRun: autoscaling/v1 Scale over `spec.replicas`.

A Scale shows `spec.replicas` and `status.replicas` (and `status.selector` when set); a
write of a Scale changes only `spec.replicas`, through the ordinary update path with
subresource `scale`, so generation, managedFields, Events and the deploy hook behave as
for a PATCH of `spec.replicas`. client-go decodes the answer with a scheme that knows
only Scale, so callers answer with a Scale, never the WorkflowRun (KUBE-API.md §5.5).

Errors (API errors): Invalid, cause `spec.replicas`, for replicas that are not a
non-negative integer; Conflict for a stale Scale `metadata.resourceVersion`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from plnt.api import errors
from plnt.registry.objects import Object
from plnt.registry.options import WriteOptions, WriteResult
from plnt.registry.store import ResourceStore

ScaleChange = Callable[[Object], Any]
"""Maps the current Scale to the wanted one (a PUT body, or a patch applied to it)."""


def to_scale(obj: Object) -> Object:
    """The autoscaling/v1 Scale of a WorkflowRun."""
    meta = obj.get("metadata", {})
    status = obj.get("status") or {}
    scale_status: dict[str, Any] = {"replicas": int(status.get("replicas") or 0)}
    if status.get("selector"):
        scale_status["selector"] = status["selector"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int((obj.get("spec") or {}).get("replicas", 1))},
        "status": scale_status,
    }


def _replicas_of(scale: Any, name: str) -> int:
    replicas = scale.get("spec", {}).get("replicas") if isinstance(scale, dict) else None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.Invalid(
            f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
            f"{replicas!r}: must be greater than or equal to 0",
            name=name,
            group="autoscaling",
            kind="Scale",
            causes=[
                errors.Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {replicas!r}: must be greater than or equal to 0",
                    "spec.replicas",
                )
            ],
        )
    return replicas


def scaled(old: Object, scale: Any, *, name: str) -> Object:
    """`old` with spec.replicas from `scale`; a Scale resourceVersion is kept for the CAS check."""
    replicas = _replicas_of(scale, name)
    new = copy.deepcopy(old)
    wanted = (scale.get("metadata") or {}).get("resourceVersion")
    if wanted:
        new["metadata"]["resourceVersion"] = wanted
    new.setdefault("spec", {})["replicas"] = replicas
    return new


async def read(store: ResourceStore, namespace: str, name: str) -> Object:
    """The Scale of the stored run."""
    return to_scale(await store.get(namespace, name))


async def write(
    store: ResourceStore, namespace: str, name: str, change: ScaleChange, options: WriteOptions
) -> WriteResult:
    """Apply `change` to the run's Scale; the result's object is the Scale after the write."""
    result = await store.update(
        namespace,
        name,
        lambda old: scaled(old, change(to_scale(old)), name=name),
        options,
        subresource="scale",
    )
    result.object = to_scale(result.object)
    result.previous = None if result.previous is None else to_scale(result.previous)
    return result
