"""Delegated authentication and authorization, with the cluster's review APIs scripted.

`Reviews` below is a test double of kube-apiserver's TokenReview and SubjectAccessReview
APIs (no kube-apiserver runs here); what is under test is plnt's side: how answers are
cached (on a fake clock, since time is the subject), that a review that cannot be made
never lets a request through, and how the authentication ConfigMap is applied. The same
code against the kube-apiserver stand-in over real HTTPS is in tests/cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from aiohttp.test_utils import make_mocked_request
from cryptography.hazmat.primitives import serialization

from plnt.apiserver import authn, authz, delegation
from plnt.kube import reviews
from plnt.kube.errors import ClusterUnavailable
from tests.support import tls


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Reviews:
    """Scripted answers; `down` makes every review fail as an unreachable cluster does."""

    def __init__(self) -> None:
        self.users: dict[str, reviews.ReviewedUser] = {}
        self.allowed: set[tuple[str, str, str]] = set()  # (user, verb, resource)
        self.denied: set[tuple[str, str, str]] = set()
        self.down = False
        self.token_calls = 0
        self.access_calls = 0

    async def review(self, token: str, *, audiences: tuple[str, ...] = ()) -> reviews.TokenVerdict:
        self.token_calls += 1
        if self.down:
            raise ClusterUnavailable("tokenreviews: connection refused")
        user = self.users.get(token)
        return reviews.TokenVerdict(user, "" if user else "invalid bearer token")


class Access(Reviews):
    async def review(self, request: reviews.AccessRequest) -> reviews.AccessVerdict:  # type: ignore[override]
        self.access_calls += 1
        if self.down:
            raise ClusterUnavailable("subjectaccessreviews: connection refused")
        key = (request.user, request.verb, request.resource or request.path)
        if key in self.denied:
            return reviews.AccessVerdict(False, True, "denied by policy")
        return reviews.AccessVerdict(key in self.allowed, False, "")


def bearer(token: str) -> Mapping[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_token_is_reviewed_once_per_ttl_and_its_user_carries_groups_and_extra() -> None:
    scripted, clock = Reviews(), Clock()
    scripted.users["t1"] = reviews.ReviewedUser("ann", "u-1", ("dev",), {"scope": ("a", "b")})
    authenticator = delegation.TokenReviewAuthenticator(scripted, ttl=10, clock=clock)
    request = make_mocked_request("GET", "/apis", headers=bearer("t1"))

    first = await authenticator.authenticate(request)
    clock.now += 9
    second = await authenticator.authenticate(request)
    assert first == second == authn.UserInfo("ann", ("dev",), "u-1", {"scope": ("a", "b")})
    assert scripted.token_calls == 1
    clock.now += 2
    await authenticator.authenticate(request)
    assert scripted.token_calls == 2


async def test_a_rejected_token_fails_and_the_rejection_is_cached_too() -> None:
    scripted, clock = Reviews(), Clock()
    authenticator = delegation.TokenReviewAuthenticator(scripted, ttl=10, clock=clock)
    request = make_mocked_request("GET", "/apis", headers=bearer("nope"))
    for _ in range(2):
        with pytest.raises(authn.AuthenticationFailed, match="invalid bearer token"):
            await authenticator.authenticate(request)
    assert scripted.token_calls == 1


async def test_an_unreachable_token_review_is_an_authentication_failure_and_is_not_cached() -> None:
    scripted = Reviews()
    scripted.down = True
    authenticator = delegation.TokenReviewAuthenticator(scripted, ttl=10, clock=Clock())
    request = make_mocked_request("GET", "/apis", headers=bearer("t1"))
    with pytest.raises(authn.AuthenticationFailed, match="cannot verify the bearer token"):
        await authenticator.authenticate(request)
    scripted.down = False
    scripted.users["t1"] = reviews.ReviewedUser("ann")
    user = await authenticator.authenticate(request)
    assert user is not None and user.name == "ann"


async def test_requests_without_a_bearer_token_are_not_the_token_authenticators() -> None:
    authenticator = delegation.TokenReviewAuthenticator(Reviews(), clock=Clock())
    for headers in ({}, {"Authorization": "Basic YTpi"}, {"Authorization": "Bearer  "}):
        assert (
            await authenticator.authenticate(make_mocked_request("GET", "/", headers=headers))
            is None
        )
    lower = make_mocked_request("GET", "/", headers={"Authorization": "bearer x"})
    assert delegation.bearer_token(lower) == "x"


def attributes(user: str, verb: str, resource: str = "", path: str = "") -> authz.Attributes:
    return authz.Attributes(
        user=authn.UserInfo(user, ("system:authenticated",)),
        verb=verb,
        resource_request=bool(resource),
        path=path or f"/apis/plnt.work/v1/namespaces/ns/{resource}",
        api_group="plnt.work" if resource else "",
        api_version="v1" if resource else "",
        namespace="ns" if resource else "",
        resource=resource,
    )


async def test_access_reviews_are_cached_with_separate_ttls_for_allowed_and_denied() -> None:
    scripted, clock = Access(), Clock()
    scripted.allowed.add(("ann", "get", "workflowruns"))
    authorizer = delegation.SubjectAccessReviewAuthorizer(
        scripted, allowed_ttl=30, denied_ttl=5, clock=clock
    )
    allowed, denied = (
        attributes("ann", "get", "workflowruns"),
        attributes("bob", "get", "workflowruns"),
    )
    assert (await authorizer.authorize(allowed))[0] is authz.Decision.ALLOW
    assert (await authorizer.authorize(denied))[0] is authz.Decision.NO_OPINION
    clock.now += 6
    await authorizer.authorize(allowed)
    await authorizer.authorize(denied)
    assert scripted.access_calls == 3  # the allow is still cached, the no was not


async def test_the_delegated_chain_allows_health_and_never_allows_when_reviews_fail() -> None:
    scripted = Access()
    scripted.down = True
    chain = delegation.delegated_authorizer(
        delegation.SubjectAccessReviewAuthorizer(scripted, clock=Clock())
    )
    health = attributes("system:anonymous", "get", path="/readyz")
    assert await chain.authorize(health) == (authz.Decision.ALLOW, "")
    with pytest.raises(authz.AuthorizerError, match="connection refused"):
        await chain.authorize(attributes("ann", "list", "workflowruns"))
    scripted.down = False
    scripted.denied.add(("ann", "delete", "workflowruns"))
    decision = await chain.authorize(attributes("ann", "delete", "workflowruns"))
    assert decision == (authz.Decision.DENY, "denied by policy")


def test_the_access_request_names_the_subresource_and_a_path_for_non_resource_requests() -> None:
    resource = authz.Attributes(
        user=authn.UserInfo("ann", ("g",), "u", {"k": ("v",)}),
        verb="create",
        resource_request=True,
        path="/apis/plnt.work/v1/namespaces/ns/workflowruns/x/invoke",
        api_group="plnt.work",
        api_version="v1",
        namespace="ns",
        resource="workflowruns",
        subresource="invoke",
        name="x",
    )
    spec = delegation.access_request(resource).spec()
    assert spec.user == "ann" and spec.groups == ["g"] and spec.extra == {"k": ["v"]}
    assert spec.resource_attributes.subresource == "invoke"
    assert spec.resource_attributes.name == "x"
    assert spec.non_resource_attributes is None
    path = delegation.access_request(attributes("ann", "get", path="/openapi/v3")).spec()
    assert path.non_resource_attributes.path == "/openapi/v3"
    assert path.resource_attributes is None


def test_the_authentication_configmap_names_a_bad_key_and_a_good_one_reaches_the_tls_listener() -> (
    None
):
    authentication = delegation.ClusterAuthentication(None)
    told: list[list[bytes]] = []
    authentication.listeners.append(told.append)
    with pytest.raises(delegation.AuthenticationConfigError, match="requestheader-client-ca-file"):
        authentication.apply({"requestheader-client-ca-file": "not a certificate"})
    with pytest.raises(delegation.AuthenticationConfigError, match="requestheader-allowed-names"):
        authentication.apply({"requestheader-allowed-names": "front-proxy-client"})
    assert not authentication.applied and told == []

    pem = tls.foreign_ca("cluster-ca").certificate.public_bytes(serialization.Encoding.PEM)
    names = '["front-proxy-client"]'
    authentication.apply({"client-ca-file": pem.decode(), "requestheader-allowed-names": names})
    assert authentication.applied
    assert told == [[pem]]
