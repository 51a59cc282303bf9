"""The middleware chain, in one visible order (outermost first):

    metrics → errors-as-Status → request info → authentication → max-in-flight
    → authorization → handler

Metrics sit outside the error mapper so they record the final status code;
authentication runs before authorization, and health paths pass without
credentials (probes carry none), as kube's AlwaysAllowPaths does. Max-in-flight
(`inflight`) sits where kube puts it: after authentication, because system:masters
is never refused, and before authorization, so a refused request costs no review.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from plnt.api import errors
from plnt.apiserver import (
    authn,
    authz,
    inflight,
    keys,
    longrunning,
    requestinfo,
    responses,
    tlsconfig,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

log = logging.getLogger("plnt.apiserver")

ANONYMOUS_PATHS = frozenset({"/healthz", "/livez", "/readyz"})


@web.middleware
async def metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    start = time.perf_counter()
    code = 500
    try:
        response = await handler(request)
        code = response.status
        return response
    except web.HTTPException as error:
        code = error.status
        raise
    except asyncio.CancelledError:
        # A watch ends when its client goes away, long after its 200 went out;
        # that is how watches end, not a server error.
        info = request.get(keys.REQUEST_INFO)
        if info is not None and info.verb == "watch":
            code = 200
        raise
    finally:
        info = request.get(keys.REQUEST_INFO)
        verb = info.verb if info is not None else request.method.lower()
        seconds = None if verb == "watch" else time.perf_counter() - start
        if info is not None and info.is_resource_request:
            request.app[keys.METRICS].observe_request(
                verb,
                code,
                seconds,
                group=info.api_group,
                resource=info.resource,
                subresource=info.subresource,
            )
        else:
            request.app[keys.METRICS].observe_request(verb, code, seconds)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The one place API errors become Status responses (or the shape a subresource
    registered for its clients, `kinds.Subresource.render_error`); anything unexpected is a
    500 Status."""
    try:
        response = await handler(request)
    except errors.APIError as error:
        response = _error_response(request, error)
    except web.HTTPNotFound:
        response = web.Response(
            status=404, text="404 page not found\n", content_type="text/plain", charset="utf-8"
        )
    except web.HTTPException:
        raise
    except Exception as error:
        if isinstance(error, ConnectionResetError) and _client_gone(request):
            # A stream whose client hung up mid-answer: nothing to answer and nobody to
            # answer to; aiohttp drops the connection. Not a server error.
            log.debug("client went away: %s %s", request.method, request.path)
            raise
        log.exception("internal error serving %s %s", request.method, request.path)
        response = responses.status_response(errors.InternalError.wrap(error))
    # kube's WithCacheControl: every answer, errors included, unless a handler chose.
    if "Cache-Control" not in response.headers and not response.prepared:
        response.headers["Cache-Control"] = "no-cache, private"
    return response


def _error_response(request: web.Request, error: errors.APIError) -> web.StreamResponse:
    """A metav1.Status, unless the request's subresource answers errors in its own shape."""
    info = request.get(keys.REQUEST_INFO)
    registered = request.app.get(keys.SUBRESOURCES)
    if info is not None and registered is not None:
        subresource = registered.find(info)
        if subresource is not None and subresource.render_error is not None:
            return subresource.render_error(error)
    return responses.status_response(error)


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


@web.middleware
async def request_info_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request[keys.REQUEST_INFO] = requestinfo.parse(request.method, request.path, request.query)
    return await handler(request)


def _connection_only(request: web.Request) -> bool:
    """True when the identity can come only from the connection's client certificate.

    Then it is the same for every request on the connection, so it is computed once
    per connection. Any bearer token or request-header identity opts out.
    """
    if "Authorization" in request.headers:
        return False
    return not any(name.lower().startswith("x-remote-") for name in request.headers)


async def _authenticate(request: web.Request) -> authn.UserInfo | None:
    authenticator = request.app[keys.AUTHENTICATOR]
    # Keyed by the connection's TLS state: it lives exactly as long as the connection
    # and can be weakly referenced with any event loop (uvloop's transports cannot).
    connection = tlsconfig.peer_ssl_object(request)
    if connection is None or not _connection_only(request):
        return await authenticator.authenticate(request)
    identities = request.app[keys.CONNECTION_IDENTITIES]
    if connection in identities:
        return identities[connection]
    user = await authenticator.authenticate(request)
    identities[connection] = user
    return user


@web.middleware
async def authentication_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        user = await _authenticate(request)
    except authn.AuthenticationFailed as error:
        log.info("authentication failed for %s: %s", request.path, error)
        raise errors.Unauthorized("Unauthorized") from error
    if user is None:
        if request.path not in ANONYMOUS_PATHS:
            raise errors.Unauthorized("Unauthorized")
        user = authn.UserInfo(name="system:anonymous", groups=("system:unauthenticated",))
    request[keys.USER] = user
    return await handler(request)


def attributes_of(request: web.Request) -> authz.Attributes:
    info: requestinfo.RequestInfo = request[keys.REQUEST_INFO]
    verb = "get" if info.verb == "head" else info.verb
    return authz.Attributes(
        user=request[keys.USER],
        verb=verb,
        resource_request=info.is_resource_request,
        path=info.path,
        api_group=info.api_group,
        api_version=info.api_version,
        namespace=info.namespace,
        resource=info.resource,
        subresource=info.subresource,
        name=info.name,
    )


# Every authenticated user may ask about itself: kube's system:basic-user role grants
# these creates to system:authenticated, whatever else the policy says.
SELF_REVIEWS = frozenset(
    {
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
    }
)


@web.middleware
async def authorization_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    attributes = attributes_of(request)
    if (
        attributes.verb == "create"
        and (attributes.api_group, attributes.resource) in SELF_REVIEWS
        and not attributes.subresource
        and not attributes.name
        and authn.SYSTEM_AUTHENTICATED in attributes.user.groups
    ):
        return await handler(request)
    try:
        decision, reason = await request.app[keys.AUTHORIZER].authorize(attributes)
    except authz.AuthorizerError as error:
        log.warning("authorization failed for %s: %s", request.path, error)
        raise errors.InternalError(f"Internal error occurred: {error}") from error
    if decision is not authz.Decision.ALLOW:
        details = authz.forbidden_status_details(attributes)
        raise errors.Forbidden(
            authz.forbidden_message(attributes, reason=reason),
            name=details.get("name", ""),
            group=details.get("group"),
            kind=details.get("kind", ""),
        )
    return await handler(request)


def max_in_flight_middleware(limiter: inflight.InFlightLimiter) -> Middleware:
    """Serve a request only while its kind has a free slot (see `inflight`)."""

    @web.middleware
    async def max_in_flight(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in ANONYMOUS_PATHS:
            return await handler(request)
        info: requestinfo.RequestInfo = request[keys.REQUEST_INFO]
        if longrunning.is_long_running(info, request.query):
            with limiter.running_long():
                return await handler(request)
        privileged = authn.SYSTEM_MASTERS in request[keys.USER].groups
        with limiter.admit(inflight.kind_of(info.verb), privileged=privileged):
            return await handler(request)

    return max_in_flight


def chain(limiter: inflight.InFlightLimiter) -> list[Middleware]:
    """The middlewares in order, outermost first."""
    return [
        metrics_middleware,
        error_middleware,
        request_info_middleware,
        authentication_middleware,
        max_in_flight_middleware(limiter),
        authorization_middleware,
    ]
