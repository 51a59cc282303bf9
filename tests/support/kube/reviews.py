"""TokenReview, SubjectAccessReview, SelfSubjectAccessReview and SelfSubjectReview.

Answered as k8s.io/kubernetes `pkg/registry/authentication/tokenreview` and
`pkg/registry/authorization/{subjectaccessreview,selfsubjectaccessreview}` answer:

* TokenReview: a token is required (400 otherwise); the audiences asked for, or the
  API server's own audiences, are checked and echoed in `status.audiences` (the
  per-test tokens are audience-agnostic, like static tokens); an unknown token gives
  `authenticated` false (omitted, as Go's omitempty does) and an empty `user`.
* SubjectAccessReview: kube's validation (exactly one of resourceAttributes and
  nonResourceAttributes, a user or a group, empty metadata) → 422; then the policy
  decides for the user, uid, groups and extra *as given* (no group is added).
* SelfSubjectAccessReview: the same for the calling user.

Every review is recorded with its answer (`Recorded`) so tests can assert on what a
server under test asked. Responses are 201 Created, as for any create.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from tests.support.kube import attributes as attributes_module
from tests.support.kube import identity, policy, schemas, statuses

Obj = dict[str, Any]
API_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)


@dataclass
class Recorded:
    """What the stand-in was asked, in order; appended from the server's thread."""

    token_reviews: list[Obj] = field(default_factory=list)
    subject_access_reviews: list[Obj] = field(default_factory=list)
    self_subject_access_reviews: list[Obj] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, bucket: list[Obj], review: Obj) -> None:
        with self.lock:
            bucket.append(review)

    def snapshot(self, bucket: list[Obj]) -> list[Obj]:
        with self.lock:
            return list(bucket)

    def clear(self) -> None:
        with self.lock:
            self.token_reviews.clear()
            self.subject_access_reviews.clear()
            self.self_subject_access_reviews.clear()


def _user_info(user: attributes_module.User) -> Obj:
    info: Obj = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra.items()}
    return info


def token_review(body: Obj, *, tokens: identity.Tokens, recorded: Recorded) -> Obj:
    schemas.check(body)
    spec = body.get("spec") or {}
    token = spec.get("token") or ""
    if not token:
        raise statuses.bad_request("token is required for TokenReview in authentication")
    audiences = list(spec.get("audiences") or API_AUDIENCES)
    user = tokens.lookup(token)
    status: Obj = {"user": {}}
    if user is not None:
        status = {
            "authenticated": True,
            "user": _user_info(user.with_authenticated_group()),
            "audiences": audiences,
        }
    answer = {
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": body.get("metadata") or {},
        "spec": spec,
        "status": status,
    }
    recorded.add(recorded.token_reviews, answer)
    return answer


def _spec_causes(spec: Obj, *, self_review: bool) -> list[statuses.Cause]:
    causes = []
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        causes.append(
            statuses.field_invalid(
                "spec.nonResourceAttributes",
                non_resource,
                "cannot be specified in combination with resourceAttributes",
            )
        )
    if resource is None and non_resource is None:
        causes.append(
            statuses.Cause(
                "FieldValueInvalid",
                "Invalid value: null: exactly one of nonResourceAttributes "
                "or resourceAttributes must be specified",
                "spec.resourceAttributes",
            )
        )
    if not self_review and not spec.get("user") and not spec.get("groups"):
        causes.append(
            statuses.field_invalid(
                "spec.user", "", "at least one of user or group must be specified"
            )
        )
    return causes


def _validate(body: Obj, kind: str, *, self_review: bool) -> None:
    schemas.check(body)
    causes = _spec_causes(body.get("spec") or {}, self_review=self_review)
    metadata = {
        k: v
        for k, v in (body.get("metadata") or {}).items()
        if k != "managedFields" and v not in (None, "", {}, [])
    }
    if metadata:
        causes.append(
            statuses.Cause("FieldValueInvalid", "Invalid value: ...: must be empty", "metadata")
        )
    if causes:
        raise statuses.invalid(kind, "authorization.k8s.io", "", causes)


def _attributes(spec: Obj, user: attributes_module.User) -> attributes_module.Attributes:
    resource = spec.get("resourceAttributes")
    if resource is not None:
        return attributes_module.Attributes(
            user=user,
            verb=resource.get("verb", ""),
            resource_request=True,
            api_group=resource.get("group", ""),
            api_version=resource.get("version", ""),
            namespace=resource.get("namespace", ""),
            resource=resource.get("resource", ""),
            subresource=resource.get("subresource", ""),
            name=resource.get("name", ""),
        )
    non_resource = spec.get("nonResourceAttributes") or {}
    return attributes_module.Attributes(
        user=user,
        verb=non_resource.get("verb", ""),
        resource_request=False,
        path=non_resource.get("path", ""),
    )


def _status(decision: policy.Decision, reason: str) -> Obj:
    status: Obj = {"allowed": decision == "allow"}
    if decision == "deny":
        status["denied"] = True
    if reason:
        status["reason"] = reason
    return status


def subject_access_review(body: Obj, *, rules: policy.Policy, recorded: Recorded) -> Obj:
    _validate(body, "SubjectAccessReview", self_review=False)
    spec = body["spec"]
    user = attributes_module.User(
        name=spec.get("user", ""),
        uid=spec.get("uid", ""),
        groups=tuple(spec.get("groups") or ()),
        extra={k: tuple(v) for k, v in (spec.get("extra") or {}).items()},
    )
    decision, reason = rules.decide(_attributes(spec, user))
    answer = {**body, "metadata": body.get("metadata") or {}, "status": _status(decision, reason)}
    recorded.add(recorded.subject_access_reviews, answer)
    return answer


def self_subject_access_review(
    body: Obj, user: attributes_module.User, *, rules: policy.Policy, recorded: Recorded
) -> Obj:
    _validate(body, "SelfSubjectAccessReview", self_review=True)
    decision, reason = rules.decide(_attributes(body["spec"], user))
    answer = {**body, "metadata": body.get("metadata") or {}, "status": _status(decision, reason)}
    recorded.add(recorded.self_subject_access_reviews, answer)
    return answer


def self_subject_review(body: Obj, user: attributes_module.User) -> Obj:
    schemas.check(body)
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": _user_info(user)},
    }
