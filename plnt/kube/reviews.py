"""TokenReview and SubjectAccessReview: asking the cluster who a caller is and what it may do.

Both are one POST to kube-apiserver (`authentication.k8s.io/v1` and
`authorization.k8s.io/v1`), made with plnt's own identity, which the cluster must allow
(`system:auth-delegator`). Any failure to get an answer is `ClusterUnavailable`: the
caller must never read it as "allowed".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubernetes_asyncio import client

from plnt.kube import errors

REQUEST_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class ReviewedUser:
    """The user a TokenReview vouched for."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class TokenVerdict:
    """A TokenReview's answer: the user, or None with the cluster's reason."""

    user: ReviewedUser | None
    error: str = ""


@dataclass(frozen=True)
class AccessRequest:
    """Who asks to do what: a SubjectAccessReviewSpec. A resource request names
    `resource` (and verb, group, …); a non-resource request names `path`."""

    user: str
    verb: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    resource: str = ""
    subresource: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    def spec(self) -> client.V1SubjectAccessReviewSpec:
        resource = non_resource = None
        if self.resource:
            resource = client.V1ResourceAttributes(
                verb=self.verb,
                group=self.group,
                version=self.version,
                resource=self.resource,
                subresource=self.subresource or None,
                namespace=self.namespace or None,
                name=self.name or None,
            )
        else:
            non_resource = client.V1NonResourceAttributes(path=self.path, verb=self.verb)
        return client.V1SubjectAccessReviewSpec(
            user=self.user,
            uid=self.uid or None,
            groups=list(self.groups) or None,
            extra={key: list(values) for key, values in self.extra.items()} or None,
            resource_attributes=resource,
            non_resource_attributes=non_resource,
        )


@dataclass(frozen=True)
class AccessVerdict:
    """A SubjectAccessReview's answer, as the cluster's authorizer gave it."""

    allowed: bool
    denied: bool = False
    reason: str = ""


class TokenReviews:
    """`POST /apis/authentication.k8s.io/v1/tokenreviews`."""

    def __init__(self, api: client.ApiClient, *, timeout: float = REQUEST_TIMEOUT_SECONDS) -> None:
        self._api = client.AuthenticationV1Api(api)
        self._timeout = timeout

    async def review(self, token: str, *, audiences: Sequence[str] = ()) -> TokenVerdict:
        body = client.V1TokenReview(
            api_version="authentication.k8s.io/v1",
            kind="TokenReview",
            spec=client.V1TokenReviewSpec(token=token, audiences=list(audiences) or None),
        )
        try:
            answer = await self._api.create_token_review(body, _request_timeout=self._timeout)
        except errors.CALL_FAILURES as error:
            raise errors.unavailable("tokenreviews", error) from error
        status = answer.status
        if status is None or not status.authenticated or status.user is None:
            return TokenVerdict(None, (status.error or "") if status is not None else "")
        user = status.user
        extra = {key: tuple(values or ()) for key, values in (user.extra or {}).items()}
        return TokenVerdict(
            ReviewedUser(
                name=user.username or "",
                uid=user.uid or "",
                groups=tuple(user.groups or ()),
                extra=extra,
            )
        )


class AccessReviews:
    """`POST /apis/authorization.k8s.io/v1/subjectaccessreviews`."""

    def __init__(self, api: client.ApiClient, *, timeout: float = REQUEST_TIMEOUT_SECONDS) -> None:
        self._api = client.AuthorizationV1Api(api)
        self._timeout = timeout

    async def review(self, request: AccessRequest) -> AccessVerdict:
        body = client.V1SubjectAccessReview(
            api_version="authorization.k8s.io/v1",
            kind="SubjectAccessReview",
            spec=request.spec(),
        )
        try:
            answer = await self._api.create_subject_access_review(
                body, _request_timeout=self._timeout
            )
        except errors.CALL_FAILURES as error:
            raise errors.unavailable("subjectaccessreviews", error) from error
        status = answer.status
        if status is None:
            return AccessVerdict(False)
        # As kube's webhook authorizer: an evaluation error is not a decision either way.
        return AccessVerdict(bool(status.allowed), bool(status.denied), status.reason or "")
