"""The `rollback` and `abort` subresources: steer a run's deploy through the API.

`POST …/rollback` with a `WorkflowRunRollback` (`{"toRevision": N}`, or `{}` / no body
for the revision before the promoted one in `status.history`) rewrites
`spec.workflow` (ref and digest) to that revision's through the ordinary update path, so
generation, managedFields, validation, dry-run and the deploy hook all behave as for any
edit. It also sets the annotations `plnt.work/rollback-to: "N"` and
`plnt.work/rollback-generation: "G"` (the generation it produced), from which the saga
records the revision's reason as "rollback to revision N". The backend is left as it
is. The answer is the updated WorkflowRun.

`POST …/abort` asks the saga to cancel the deploy in flight (its compensation runs) and
answers a metav1.Status Success. `POST …/promote` asks it to end a canary's pause
(`spec.canary.pauseSeconds`) now, so promotion follows at once (Argo Rollouts' `promote`),
and answers the same way.

Errors (metav1.Status):
* rollback: 400 BadRequest when there is no earlier revision (empty history, or the
  promoted revision is the oldest); 422 Invalid, cause `toRevision`, for a revision not
  in the history (the message lists the known ones); 409 Conflict when the spec already
  pins that revision's ref and digest (nothing to roll back; rolling back to the promoted
  revision while a newer spec is being deployed is allowed and undoes that deploy).
* abort: 409 Conflict when no deploy is in flight; promote: 409 Conflict when no canary
  is pausing; both: 503 ServiceUnavailable when the server has no sagas or Temporal
  cannot be reached.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pydantic
from aiohttp import web

from plnt.api import errors
from plnt.api.workflowruns import (
    ROLLBACK_GENERATION_ANNOTATION,
    ROLLBACK_TO_ANNOTATION,
    WorkflowRunRollback,
)
from plnt.apiserver import keys, negotiation, params, responses
from plnt.apiserver.requestinfo import RequestInfo
from plnt.registry import decoding, fieldcauses, transitions
from plnt.registry.definitions import Object, lookup
from plnt.registry.store import ResourceStore
from plnt.sagas.control import DeployControl, DeployUnavailable


async def _rollback_body(request: web.Request, name: str) -> WorkflowRunRollback:
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    raw = await params.read_body(request, limit=limit)
    if not raw.strip():
        return WorkflowRunRollback()
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in ("", "*/*", "application/json", "application/yaml"):
        raise errors.UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            "application/json, application/yaml"
        )
    try:
        body, _ = decoding.decode_body(raw, content_type=media or "application/json")
    except decoding.DecodeError as error:
        raise errors.BadRequest(f"the body of the request could not be decoded: {error}") from error
    if not isinstance(body, dict):
        raise errors.BadRequest("the rollback body must be a JSON object")
    try:
        return WorkflowRunRollback.model_validate(body)
    except pydantic.ValidationError as error:
        causes = [
            errors.Cause(c.reason, c.message, c.field) for c in fieldcauses.validation_causes(error)
        ]
        raise errors.Invalid.of("WorkflowRunRollback.plnt.work", name, causes) from error


def _records(obj: Object) -> list[dict[str, Any]]:
    history = lookup(obj, "status", "history") or []
    return [r for r in history if isinstance(r, dict) and isinstance(r.get("revision"), int)]


def _target(obj: Object, name: str, to_revision: int | None) -> dict[str, Any]:
    """The history record to return to, or the API error that says why there is none."""
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


def _rolled_back(
    old: Object, name: str, wanted: int | None, *, resource: errors.GroupResource
) -> Object:
    record = _target(old, name, wanted)
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


async def handle_rollback(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    if info.verb != "create":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    wanted = (await _rollback_body(request, info.name)).to_revision
    options = params.write_options(request.query, user_agent=request.headers.get("User-Agent", ""))
    result = await store.update(
        info.namespace,
        info.name,
        lambda old: _rolled_back(old, info.name, wanted, resource=store.definition.group_resource),
        options,
    )
    if not options.dry_run:
        recorder = request.app[keys.RECORDER]
        revision = lookup(result.object, "metadata", "annotations", ROLLBACK_TO_ANNOTATION)
        recorder.record(
            result.object,
            type="Normal",
            reason="RollbackRequested",
            message=f"rollback to revision {revision} requested",
        )
        for t in transitions.workflowrun_transitions(result.previous, result.object):
            recorder.record(result.object, type=t.type, reason=t.reason, message=t.message)
    return responses.json_response(result.object, warnings=result.warnings)


async def handle_abort(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    return await _steer(request, store, info, _ABORT)


async def handle_promote(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    return await _steer(request, store, info, _PROMOTE)


@dataclass(frozen=True)
class _Steering:
    """One yes/no request to the saga, and how the API speaks of it."""

    verb: str  # in messages: "abort", "promote"
    ask: Callable[[DeployControl], Callable[[dict[str, Any]], Awaitable[bool]]]
    nothing: str  # the Conflict message when the saga answers no
    done: str  # the Success message, formatted with the generation


_ABORT = _Steering(
    "abort",
    lambda deploy: deploy.abort,
    "no deploy is in flight",
    "deploy of generation {} aborted",
)
_PROMOTE = _Steering(
    "promote",
    lambda deploy: deploy.promote,
    "no canary is pausing",
    "canary of generation {} promoted before its pause ended",
)


async def _steer(
    request: web.Request, store: ResourceStore, info: RequestInfo, steering: _Steering
) -> web.Response:
    if info.verb != "create":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    deploy = request.app[keys.DEPLOY]
    if deploy is None:
        raise errors.ServiceUnavailable(
            f"this API server runs without sagas: there is no deploy to {steering.verb}"
        )
    obj = await store.get(info.namespace, info.name)
    generation = int(lookup(obj, "metadata", "generation") or 0)
    try:
        agreed = await steering.ask(deploy)(obj)
    except DeployUnavailable as error:
        raise errors.ServiceUnavailable(
            f"the deploy of workflowrun {info.name} could not be asked to {steering.verb}: {error}",
            retry_after_seconds=5,
        ) from error
    if not agreed:
        raise errors.Conflict.of(store.definition.group_resource, info.name, steering.nothing)
    status = responses.success_status(
        name=info.name,
        group=store.definition.group,
        kind=store.definition.plural,
        uid=str(lookup(obj, "metadata", "uid") or ""),
    )
    status["message"] = steering.done.format(generation)
    status["code"] = 200
    return responses.json_response(status)
