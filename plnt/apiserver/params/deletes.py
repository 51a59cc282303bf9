"""DeleteOptions, from the body when there is one and otherwise from the query (kube's rule)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from plnt.api import errors
from plnt.apiserver import queryvalues
from plnt.apiserver.params import fielderrors, requestbodies
from plnt.registry.labelnames import go_json_type
from plnt.registry.options import DeleteOptions

PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")


async def delete_options(request: web.Request, *, limit: int) -> DeleteOptions:
    """DeleteOptions from the body when there is one, otherwise from the query (kube's rule).

    From the query: gracePeriodSeconds, orphanDependents, propagationPolicy, dryRun, and
    `uid`/`resourceVersion` as preconditions. Then ValidateDeleteOptions (422).
    """
    data = await requestbodies.read_body(request, limit=limit)
    body = _delete_body(data) if data.strip() else _delete_query(request.query)
    causes: list[errors.Cause] = []
    policy = body.get("propagationPolicy")
    if body.get("orphanDependents") is not None and policy is not None:
        causes.append(
            errors.Cause(
                "FieldValueInvalid",
                f"Invalid value: {fielderrors.json_value(policy)}: orphanDependents and "
                "deletionPropagation cannot be both set",
                "propagationPolicy",
            )
        )
    if policy is not None and policy not in PROPAGATION_POLICIES:
        causes.append(
            fielderrors.not_supported(
                "propagationPolicy", fielderrors.json_value(policy), [*PROPAGATION_POLICIES, "nil"]
            )
        )
    runs = body.get("dryRun") or []
    if not isinstance(runs, list):
        raise errors.BadRequest("DeleteOptions.dryRun must be a list of strings")
    causes.extend(fielderrors.dry_run_causes(runs))
    if causes:
        raise fielderrors.options_invalid("DeleteOptions", causes)
    pre = body.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise errors.BadRequest("preconditions must be an object")
    return DeleteOptions(
        dry_run=bool(runs),
        precondition_uid=pre.get("uid"),
        precondition_resource_version=pre.get("resourceVersion"),
    )


def _delete_body(data: bytes) -> dict[str, Any]:
    """A DeleteOptions body (kind and apiVersion optional); typed fields are checked."""
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise errors.BadRequest(f"the DeleteOptions body is not valid JSON: {error}") from error
    if not isinstance(parsed, dict):
        raise errors.BadRequest("DeleteOptions must be a JSON object")
    kind = parsed.get("kind")
    if kind not in (None, "", "DeleteOptions"):
        raise errors.BadRequest(f'expected kind DeleteOptions, got "{kind}"')
    grace = parsed.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise errors.BadRequest(
            "json: cannot unmarshal "
            f"{go_json_type(grace)} into Go struct field DeleteOptions.gracePeriodSeconds "
            "of type int64"
        )
    for name in ("orphanDependents",):
        value = parsed.get(name)
        if value is not None and not isinstance(value, bool):
            raise errors.BadRequest(
                f"json: cannot unmarshal {go_json_type(value)} into Go struct field "
                f"DeleteOptions.{name} of type bool"
            )
    policy = parsed.get("propagationPolicy")
    if policy is not None and not isinstance(policy, str):
        raise errors.BadRequest(
            f"json: cannot unmarshal {go_json_type(policy)} into Go struct field "
            "DeleteOptions.propagationPolicy of type v1.DeletionPropagation"
        )
    return parsed


def _delete_query(query: MultiMapping[str]) -> dict[str, Any]:
    """The query as a DeleteOptions body (conversion errors are 400s naming the parameter)."""
    queryvalues.pretty(query)
    body: dict[str, Any] = {}
    grace = queryvalues.integer(query, "gracePeriodSeconds")
    if grace is not None:
        body["gracePeriodSeconds"] = grace
    orphan = queryvalues.boolean(query, "orphanDependents")
    if orphan is not None:
        body["orphanDependents"] = orphan
    policy = queryvalues.first(query, "propagationPolicy")
    if policy is not None:
        body["propagationPolicy"] = policy
    runs = query.getall("dryRun", [])
    if runs:
        body["dryRun"] = list(runs)
    pre: dict[str, str] = {}
    if uid := queryvalues.first(query, "uid"):
        pre["uid"] = uid
    if rv := queryvalues.first(query, "resourceVersion"):
        pre["resourceVersion"] = rv
    if pre:
        body["preconditions"] = pre
    return body
