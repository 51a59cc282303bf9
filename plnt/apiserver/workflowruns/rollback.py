"""The `rollback`, `abort`, `promote` and `retry` subresources: steer a run's deploy.

`POST …/rollback` with a `WorkflowRunRollback` (`{"toRevision": N}`, or `{}` / no body
for the revision before the promoted one in `status.history`) is decoded here and
carried out by `plnt.registry.workflowruns.rollback` (the revision choice, the rewrite
of `spec.workflow`, and its errors: 400, 422 naming `toRevision`, 409); its Events come
from the store's after-write hook like any edit's. The answer is the updated WorkflowRun.

`POST …/abort` asks the saga to cancel the deploy in flight (its compensation runs) and
answers a metav1.Status Success. `POST …/promote` asks it to end a canary's pause
(`spec.canary.pauseSeconds`) now, so promotion follows at once (Argo Rollouts' `promote`),
and answers the same way. `POST …/retry` asks it to try a deploy that failed for a
reason time may fix (it waits out a backoff of 10 s doubling to 5 min) again now.

Errors (metav1.Status), beyond the rollback's: 422 Invalid for a malformed rollback
body; abort: 409 Conflict when no deploy is in flight; promote: 409 Conflict when no
canary is pausing; retry: 409 Conflict naming the run's phase when no failed deploy waits
for a retry; all three: 503 ServiceUnavailable when the server has no sagas or Temporal
cannot be reached.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pydantic
from aiohttp import web

from plnt.api import errors
from plnt.api.workflowruns import WorkflowRunRollback
from plnt.apiserver import keys, params, responses
from plnt.apiserver.requestinfo import RequestInfo
from plnt.apiserver.workflowruns import keys as run_keys
from plnt.registry import fieldcauses
from plnt.registry.definitions import lookup
from plnt.registry.store import ResourceStore
from plnt.registry.workflowruns import rollback as rollbacks
from plnt.sagas.control import DeployControl, DeployUnavailable


async def _rollback_body(request: web.Request, name: str) -> WorkflowRunRollback:
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    body = await params.decode_optional(request, limit=limit)
    if body is None:
        return WorkflowRunRollback()
    if not isinstance(body, dict):
        raise errors.BadRequest("the rollback body must be a JSON object")
    try:
        return WorkflowRunRollback.model_validate(body)
    except pydantic.ValidationError as error:
        causes = [
            errors.Cause(c.reason, c.message, c.field) for c in fieldcauses.validation_causes(error)
        ]
        raise errors.Invalid.of("WorkflowRunRollback.plnt.work", name, causes) from error


async def handle_rollback(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    if info.verb != "create":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    wanted = (await _rollback_body(request, info.name)).to_revision
    options = params.write_options(request.query, user_agent=request.headers.get("User-Agent", ""))
    result = await rollbacks.rollback(
        store, info.namespace, info.name, to_revision=wanted, options=options
    )
    return responses.json_response(result.object, warnings=result.warnings)


async def handle_abort(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    return await _steer(request, store, info, _ABORT)


async def handle_promote(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    return await _steer(request, store, info, _PROMOTE)


async def handle_retry(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    return await _steer(request, store, info, _RETRY)


@dataclass(frozen=True)
class _Steering:
    """One yes/no request to the saga, and how the API speaks of it."""

    verb: str  # in messages: "abort", "promote", "retry"
    ask: Callable[[DeployControl], Callable[[dict[str, Any]], Awaitable[bool]]]
    nothing: str  # the Conflict message when the saga answers no ({phase}: the run's)
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
_RETRY = _Steering(
    "retry",
    lambda deploy: deploy.retry,
    "no failed deploy waits for a retry (phase {phase})",
    "the deploy of generation {} is being tried again now",
)


async def _steer(
    request: web.Request, store: ResourceStore, info: RequestInfo, steering: _Steering
) -> web.Response:
    if info.verb != "create":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    obj = await store.get(info.namespace, info.name)  # a missing run is 404 first, as in kube
    deploy = request.app[run_keys.DEPLOY]
    if deploy is None:
        raise errors.ServiceUnavailable(
            f"this API server runs without sagas: there is no deploy to {steering.verb}"
        )
    generation = int(lookup(obj, "metadata", "generation") or 0)
    try:
        agreed = await steering.ask(deploy)(obj)
    except DeployUnavailable as error:
        raise errors.ServiceUnavailable(
            f"the deploy of workflowrun {info.name} could not be asked to {steering.verb}: {error}",
            retry_after_seconds=5,
        ) from error
    if not agreed:
        phase = lookup(obj, "status", "phase") or "Pending"
        why = steering.nothing.format(phase=phase)
        raise errors.Conflict.of(store.definition.group_resource, info.name, why)
    status = responses.success_status(
        name=info.name,
        group=store.definition.group,
        kind=store.definition.plural,
        uid=str(lookup(obj, "metadata", "uid") or ""),
    )
    status["message"] = steering.done.format(generation)
    status["code"] = 200
    return responses.json_response(status)
