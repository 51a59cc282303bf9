"""Self reviews: what `kubectl auth can-i` and `kubectl auth whoami` ask the server.

SelfSubjectAccessReview and SelfSubjectReview are answered by plnt's own
authorizer and authenticator; SelfSubjectRulesReview (`kubectl auth can-i --list`) by
the rules the authorizer can list (`authz.RuleResolver`), standalone only: under
`plnt serve` kube-apiserver answers it. kubectl sends these as protobuf and does not fall
back to JSON on a 415, so the few string fields they carry are read from the
protobuf wire format (`protowire`).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from plnt.api import errors
from plnt.apiserver import authn, authz, keys, negotiation, params, protowire, responses

AUTHORIZATION_V1 = "authorization.k8s.io/v1"
AUTHENTICATION_V1 = "authentication.k8s.io/v1"
SELF_REVIEW_PATHS = frozenset(
    {
        f"/apis/{AUTHORIZATION_V1}/selfsubjectaccessreviews",
        f"/apis/{AUTHENTICATION_V1}/selfsubjectreviews",
        f"/apis/{AUTHORIZATION_V1}/selfsubjectrulesreviews",
    }
)
SELF_REVIEW_RULES = (
    authz.ResourceRule(
        ("create",),
        ("authorization.k8s.io",),
        ("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
    ),
    authz.ResourceRule(("create",), ("authentication.k8s.io",), ("selfsubjectreviews",)),
)
"""What every authenticated user may ask about itself (kube's system:basic-user role)."""


PROTOBUF = protowire.PROTOBUF
# Field numbers of the generated k8s.io/api protobuf messages a self review carries.
_RESOURCE_ATTRIBUTES = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
_NON_RESOURCE_ATTRIBUTES = ("path", "verb")


def _decode_protobuf_review(data: bytes) -> dict[str, Any]:
    """A self review sent as kube protobuf: the `k8s\\0` envelope around runtime.Unknown."""
    spec_fields = protowire.fields(protowire.fields(protowire.unwrap(data)).get(2, b""))
    spec: dict[str, Any] = {}
    if 1 in spec_fields:
        spec["resourceAttributes"] = protowire.strings(spec_fields[1], _RESOURCE_ATTRIBUTES)
    if 2 in spec_fields:
        spec["nonResourceAttributes"] = protowire.strings(spec_fields[2], _NON_RESOURCE_ATTRIBUTES)
    return {"spec": spec}


def _decode_protobuf_rules_review(data: bytes) -> dict[str, Any]:
    """A SelfSubjectRulesReview sent as kube protobuf: its spec holds only `namespace`."""
    raw = protowire.unwrap(data)
    spec = protowire.strings(protowire.fields(raw).get(2, b""), ("namespace",))
    return {"spec": spec}


async def _review_body(request: web.Request, kind: str) -> dict[str, Any]:
    """The review as JSON, or as the protobuf typed clients (`kubectl auth`) send first."""
    media = negotiation.content_type(request.headers.get("Content-Type"))
    if media not in ("", negotiation.JSON, PROTOBUF):
        raise errors.UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types include: "
            f"application/json, {PROTOBUF}"
        )
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    data = await params.read_body(request, limit=limit)
    if media == PROTOBUF:
        if kind == "SelfSubjectRulesReview":
            return _decode_protobuf_rules_review(data)
        return _decode_protobuf_review(data)
    try:
        body = json.loads(data) if data.strip() else {}
    except ValueError as error:
        raise errors.BadRequest(f"the body of the request could not be decoded: {error}") from error
    if not isinstance(body, dict) or body.get("kind") not in (None, "", kind):
        raise errors.BadRequest(f"the request body must be a {kind}")
    return body


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


async def self_subject_access_review(request: web.Request) -> web.Response:
    """Ask the server's own authorizer about the caller, as kube-apiserver does (201)."""
    body = await _review_body(request, "SelfSubjectAccessReview")
    raw_spec = body.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    user: authn.UserInfo = request[keys.USER]
    if isinstance(resource, dict):
        attributes = authz.Attributes(
            user=user,
            verb=_text(resource.get("verb")),
            resource_request=True,
            path="",
            api_group=_text(resource.get("group")),
            api_version=_text(resource.get("version")),
            namespace=_text(resource.get("namespace")),
            resource=_text(resource.get("resource")),
            subresource=_text(resource.get("subresource")),
            name=_text(resource.get("name")),
        )
    elif isinstance(non_resource, dict):
        attributes = authz.Attributes(
            user=user,
            verb=_text(non_resource.get("verb")),
            resource_request=False,
            path=_text(non_resource.get("path")),
        )
    else:
        raise errors.Invalid.of(
            "SelfSubjectAccessReview.authorization.k8s.io",
            "",
            [
                errors.Cause(
                    "FieldValueInvalid",
                    "Invalid value: null: exactly one of nonResourceAttributes or "
                    "resourceAttributes must be specified",
                    "spec.resourceAttributes",
                )
            ],
        )
    try:
        decision, reason = await request.app[keys.AUTHORIZER].authorize(attributes)
    except authz.AuthorizerError as error:
        raise errors.InternalError(f"Internal error occurred: {error}") from error
    status: dict[str, Any] = {"allowed": decision is authz.Decision.ALLOW}
    if decision is authz.Decision.DENY and reason:
        status["reason"] = reason
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    reply = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": AUTHORIZATION_V1,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }
    return responses.json_response(reply, status=201)


async def self_subject_review(request: web.Request) -> web.Response:
    """The caller's own identity, as the server authenticated it (201)."""
    body = await _review_body(request, "SelfSubjectReview")
    user: authn.UserInfo = request[keys.USER]
    info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra.items()}
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    reply = {
        "kind": "SelfSubjectReview",
        "apiVersion": AUTHENTICATION_V1,
        "metadata": metadata,
        "status": {"userInfo": info},
    }
    return responses.json_response(reply, status=201)


async def self_subject_rules_review(request: web.Request) -> web.Response:
    """What the caller may do in `spec.namespace`, from the authorizer's rules (201)."""
    body = await _review_body(request, "SelfSubjectRulesReview")
    raw_spec = body.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    namespace = _text(spec.get("namespace"))
    if not namespace:
        raise errors.BadRequest("no namespace on request")
    user: authn.UserInfo = request[keys.USER]
    authorizer = request.app[keys.AUTHORIZER]
    if isinstance(authorizer, authz.RuleResolver):
        rules = authorizer.rules_for(user, namespace)
    else:
        rules = authz.Rules(incomplete=True)
    if authn.SYSTEM_AUTHENTICATED in user.groups:
        rules = authz.Rules(SELF_REVIEW_RULES) + rules
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    reply = {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": AUTHORIZATION_V1,
        "metadata": metadata,
        "spec": {"namespace": namespace},
        "status": {
            "resourceRules": [rule.to_wire() for rule in rules.resource_rules],
            "nonResourceRules": [rule.to_wire() for rule in rules.non_resource_rules],
            "incomplete": rules.incomplete,
        },
    }
    return responses.json_response(reply, status=201)


def add_routes(app: web.Application, *, rules: bool = False) -> None:
    """Register the self-review endpoints; `rules`: SelfSubjectRulesReview too."""
    app.router.add_post(
        f"/apis/{AUTHORIZATION_V1}/selfsubjectaccessreviews", self_subject_access_review
    )
    app.router.add_post(f"/apis/{AUTHENTICATION_V1}/selfsubjectreviews", self_subject_review)
    if rules:
        app.router.add_post(
            f"/apis/{AUTHORIZATION_V1}/selfsubjectrulesreviews", self_subject_rules_review
        )
