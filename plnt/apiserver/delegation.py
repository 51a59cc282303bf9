"""Delegated authentication and authorization: in a cluster, plnt asks the cluster.

As k8s.io/apiserver's delegating options do for every aggregated API server:

* `ClusterAuthentication` authenticates from what the cluster publishes in
  `kube-system/extension-apiserver-authentication` (`apply` takes each version of its
  data): the front proxy's `X-Remote-*` headers, trusted only from a client certificate
  of `requestheader-client-ca-file` with an allowed CN; client certificates of
  `client-ca-file`; and bearer tokens through TokenReview.
* `TokenReviewAuthenticator` caches each token's answer for a short TTL (successes and
  rejections; never a failure to get an answer). A TokenReview that cannot be made is
  an authentication failure (401), never an open door.
* `SubjectAccessReviewAuthorizer` asks a SubjectAccessReview for every request the
  always-allowed rules do not settle, with separate TTLs for allowed and denied
  answers; a review that cannot be made raises `authz.AuthorizerError` (500), never
  allows.

Errors: `AuthenticationConfigError` (the ConfigMap's data cannot be used; the message
names the key).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Generic, Protocol, TypeVar

from aiohttp import web

from plnt.apiserver import authn, authz, tlsconfig
from plnt.kube import reviews
from plnt.kube.errors import ClusterUnavailable

DEFAULT_TTL_SECONDS = 10.0
"""k8s.io/apiserver's default for the token and both authorization caches."""

Clock = Callable[[], float]
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class AuthenticationConfigError(Exception):
    """The authentication ConfigMap's data cannot be used; the message names the key."""


class TokenReviewer(Protocol):
    async def review(self, token: str, *, audiences: tuple[str, ...] = ()) -> reviews.TokenVerdict:
        """Who `token` belongs to (`plnt.kube.reviews.TokenReviews`)."""
        ...


class AccessReviewer(Protocol):
    async def review(self, request: reviews.AccessRequest) -> reviews.AccessVerdict:
        """What the cluster's authorizer says (`plnt.kube.reviews.AccessReviews`)."""
        ...


class _Expiring(Generic[K, V]):
    """A small map whose entries expire after the TTL given when each was stored."""

    def __init__(self, clock: Clock, *, limit: int = 4096) -> None:
        self._clock = clock
        self._limit = limit
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        if len(self._entries) >= self._limit:  # drop the oldest entry (insertion order)
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (self._clock() + ttl, value)


def bearer_token(request: web.Request) -> str | None:
    """The token of `Authorization: Bearer …` (scheme case-insensitive, as kube reads it)."""
    header = request.headers.get("Authorization", "").strip()
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None


class TokenReviewAuthenticator:
    """Bearer tokens, vouched for by the cluster's TokenReview API (cached for `ttl`)."""

    def __init__(
        self,
        reviewer: TokenReviewer,
        *,
        ttl: float = DEFAULT_TTL_SECONDS,
        clock: Clock = time.monotonic,
    ) -> None:
        self._reviewer = reviewer
        self._ttl = ttl
        self._cache: _Expiring[str, reviews.TokenVerdict] = _Expiring(clock)

    async def authenticate(self, request: web.Request) -> authn.UserInfo | None:
        token = bearer_token(request)
        if token is None:
            return None
        verdict = self._cache.get(token)
        if verdict is None:
            try:
                verdict = await self._reviewer.review(token)
            except ClusterUnavailable as error:
                raise authn.AuthenticationFailed(
                    f"cannot verify the bearer token: {error}"
                ) from error
            self._cache.put(token, verdict, self._ttl)
        user = verdict.user
        if user is None:
            raise authn.AuthenticationFailed(verdict.error or "token not authenticated")
        return authn.UserInfo(name=user.name, groups=user.groups, uid=user.uid, extra=user.extra)


def access_request(attributes: authz.Attributes) -> reviews.AccessRequest:
    """The SubjectAccessReview spec of one request's attributes."""
    user = attributes.user
    subject = reviews.AccessRequest(
        user=user.name, uid=user.uid, groups=user.groups, extra=user.extra, verb=attributes.verb
    )
    if not attributes.resource_request:
        return dataclasses.replace(subject, path=attributes.path)
    return dataclasses.replace(
        subject,
        group=attributes.api_group,
        version=attributes.api_version,
        resource=attributes.resource,
        subresource=attributes.subresource,
        namespace=attributes.namespace,
        name=attributes.name,
    )


def _cache_key(request: reviews.AccessRequest) -> tuple[object, ...]:
    extra = tuple(sorted((key, tuple(values)) for key, values in request.extra.items()))
    return (
        request.user,
        request.uid,
        request.groups,
        extra,
        request.verb,
        request.group,
        request.version,
        request.resource,
        request.subresource,
        request.namespace,
        request.name,
        request.path,
    )


class SubjectAccessReviewAuthorizer:
    """The cluster's authorizer (RBAC, webhooks …), through SubjectAccessReview."""

    def __init__(
        self,
        reviewer: AccessReviewer,
        *,
        allowed_ttl: float = DEFAULT_TTL_SECONDS,
        denied_ttl: float = DEFAULT_TTL_SECONDS,
        clock: Clock = time.monotonic,
    ) -> None:
        self._reviewer = reviewer
        self._allowed_ttl, self._denied_ttl = allowed_ttl, denied_ttl
        self._cache: _Expiring[tuple[object, ...], reviews.AccessVerdict] = _Expiring(clock)

    async def authorize(self, attributes: authz.Attributes) -> tuple[authz.Decision, str]:
        request = access_request(attributes)
        key = _cache_key(request)
        verdict = self._cache.get(key)
        if verdict is None:
            try:
                verdict = await self._reviewer.review(request)
            except ClusterUnavailable as error:
                raise authz.AuthorizerError(str(error)) from error
            self._cache.put(
                key, verdict, self._allowed_ttl if verdict.allowed else self._denied_ttl
            )
        if verdict.allowed:
            return authz.Decision.ALLOW, verdict.reason
        if verdict.denied:
            return authz.Decision.DENY, verdict.reason
        return authz.Decision.NO_OPINION, verdict.reason


def delegated_authorizer(reviewer: SubjectAccessReviewAuthorizer) -> authz.UnionAuthorizer:
    """k8s.io/apiserver's delegating chain: `system:masters` and the health paths are
    always allowed; everything else (discovery and `/openapi/*` included, which the
    cluster's `system:discovery` role grants) is the cluster's decision."""
    return authz.UnionAuthorizer(
        [
            authz.AlwaysAllowGroupsAuthorizer(),
            authz.AlwaysAllowPathsAuthorizer(authz.ALWAYS_ALLOWED_PATHS),
            reviewer,
        ]
    )


def _bundle(data: Mapping[str, str], key: str) -> tlsconfig.TrustBundle | None:
    pem = data.get(key, "")
    if not pem.strip():
        return None
    try:
        return tlsconfig.TrustBundle.from_pem(pem.encode(), source=key)
    except tlsconfig.TrustBundleError as error:
        raise AuthenticationConfigError(f"{key}: {error}") from error


class ClusterAuthentication:
    """The authenticator chain the cluster's authentication ConfigMap currently implies.

    `apply` replaces the chain atomically (a request sees the old or the new one, never
    a mixture) and tells each listener the CA certificates that may now sign client
    certificates, so the TLS context can ask for them.
    """

    def __init__(self, tokens: TokenReviewAuthenticator | None) -> None:
        self._tokens = tokens
        self._chain = authn.UnionAuthenticator([tokens] if tokens else [])
        self.listeners: list[Callable[[list[bytes]], None]] = []
        self.applied = False

    def apply(self, data: Mapping[str, str]) -> None:
        """Use a version of the ConfigMap's data; `AuthenticationConfigError` names a bad key."""
        client_ca = _bundle(data, "client-ca-file")
        front_proxy_ca = _bundle(data, "requestheader-client-ca-file")
        try:
            options = authn.RequestHeaderOptions.from_configmap(data)
        except ValueError as error:
            raise AuthenticationConfigError(str(error)) from error
        chain: list[authn.Authenticator] = []
        if front_proxy_ca is not None:
            chain.append(authn.RequestHeaderAuthenticator(front_proxy_ca, options=options))
        if client_ca is not None:
            chain.append(authn.ClientCertificateAuthenticator(client_ca))
        if self._tokens is not None:
            chain.append(self._tokens)
        self._chain = authn.UnionAuthenticator(chain)
        self.applied = True
        pems = [
            data.get(key, "").encode() for key in ("client-ca-file", "requestheader-client-ca-file")
        ]
        for listener in self.listeners:
            listener([pem for pem in pems if pem.strip()])

    async def authenticate(self, request: web.Request) -> authn.UserInfo | None:
        return await self._chain.authenticate(request)
