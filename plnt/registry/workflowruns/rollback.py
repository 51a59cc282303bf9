"""Rolling a WorkflowRun back: which revision of `status.history`, and the spec that pins it.

`choose_revision` and `rolled_back` are pure: the revision choice and the rewrite of
`spec.workflow` (ref and digest) to that revision's. `rollback` runs the rewrite through
the ordinary update path, so generation, managedFields, validation, dry-run, Events and
the deploy hook behave as for any edit. The rewrite also sets the annotations
`plnt.work/rollback-to: "N"` and `plnt.work/rollback-generation: "G"` (the generation it
produces), from which the saga records the revision's reason as "rollback to revision N"
and the transition rules record `RollbackRequested`. The backend is left as it is.

Errors (API errors): BadRequest when there is no earlier revision (empty history, or the
promoted revision is the oldest); Invalid, cause `toRevision`, for a revision not in the
history (the message lists the known ones); Conflict when the spec already pins that
revision's ref and digest (rolling back to the promoted revision while a newer spec is
being deployed is allowed and undoes that deploy).
"""

from __future__ import annotations

from typing import Any

from plnt.api import errors
from plnt.api.workflowruns import ROLLBACK_GENERATION_ANNOTATION, ROLLBACK_TO_ANNOTATION
from plnt.registry.objects import Object, lookup
from plnt.registry.options import WriteOptions, WriteResult
from plnt.registry.store import ResourceStore

Record = dict[str, Any]
"""One entry of `status.history`: revision, digest, ref, reason."""


def _records(obj: Object) -> list[Record]:
    history = lookup(obj, "status", "history") or []
    return [r for r in history if isinstance(r, dict) and isinstance(r.get("revision"), int)]


def choose_revision(obj: Object, *, name: str, to_revision: int | None) -> Record:
    """The history record to return to: `to_revision`'s, or by default the one before the
    promoted revision (`status.revision`); else the API error that says why there is none."""
    records = _records(obj)
    if to_revision is None:
        current = lookup(obj, "status", "revision")
        earlier = [r for r in records if isinstance(current, int) and r["revision"] < current]
        if not earlier:
            raise errors.BadRequest(f"workflowrun {name} has no earlier revision to roll back to")
        return max(earlier, key=lambda r: int(r["revision"]))
    found = next((r for r in records if r["revision"] == to_revision), None)
    if found is None:
        known = ", ".join(str(r["revision"]) for r in records) or "none"
        message = f"Invalid value: {to_revision}: not in status.history (known revisions: {known})"
        raise errors.Invalid.of(
            "WorkflowRun.plnt.work",
            name,
            [errors.Cause("FieldValueNotFound", message, "toRevision")],
        )
    return found


def rolled_back(
    old: Object, *, name: str, to_revision: int | None, resource: errors.GroupResource
) -> Object:
    """`old` (changed in place) pinned to the chosen revision, with the rollback annotations."""
    record = choose_revision(old, name=name, to_revision=to_revision)
    revision = int(record["revision"])
    spec = old.setdefault("spec", {})
    workflow = dict(spec.get("workflow") or {})
    new_workflow = {**workflow, "digest": record["digest"]}
    if record.get("ref"):
        new_workflow["ref"] = record["ref"]
    if new_workflow == workflow:
        raise errors.Conflict.of(
            resource,
            name,
            f"the spec already pins revision {revision} ({record['digest']}); nothing to roll back",
        )
    spec["workflow"] = new_workflow
    meta = old["metadata"]
    annotations = dict(meta.get("annotations") or {})
    annotations[ROLLBACK_TO_ANNOTATION] = str(revision)
    annotations[ROLLBACK_GENERATION_ANNOTATION] = str(int(meta.get("generation") or 1) + 1)
    meta["annotations"] = annotations
    meta.pop("resourceVersion", None)
    return old


async def rollback(
    store: ResourceStore,
    namespace: str,
    name: str,
    *,
    to_revision: int | None,
    options: WriteOptions,
) -> WriteResult:
    """Roll the stored run back (see the module docstring); the result is the updated run."""
    resource = store.definition.group_resource
    return await store.update(
        namespace,
        name,
        lambda old: rolled_back(old, name=name, to_revision=to_revision, resource=resource),
        options,
    )
