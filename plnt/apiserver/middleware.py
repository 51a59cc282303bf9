"""The request pipeline, one middleware (`pipeline`) whose steps run in this order:

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
import contextlib
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


def pipeline(
    limiter: inflight.InFlightLimiter, *, long_running: longrunning.LongRunning
) -> Middleware:
    """The one middleware: every step of the module docstring, in that order;
    `long_running` knows which requests the installed kinds declare long-running.

    One frame instead of six nested ones, because the request path is CPU-bound and each
    awaited layer costs a coroutine, a frame and an exception path per request. It
    awaits only where a step must wait: authentication of a connection not seen before
    (or of a token or front-proxy identity), an authorizer that has to ask (a
    SubjectAccessReview; `system:masters`, the health paths and the standalone policy
    are decided in place, `authz.decide_now`), and the handler.
    """

    @web.middleware
    async def serve(request: web.Request, handler: Handler) -> web.StreamResponse:
        # metrics: outermost, so they see the final code.
        start = time.perf_counter()
        code = 500
        try:
            # errors-as-Status
            try:
                # request info
                info = requestinfo.parse(request.method, request.path, request.query)
                request[keys.REQUEST_INFO] = info
                # authentication
                known = _known_identity(request)
                if isinstance(known, _Unknown):
                    known = await _authenticate(request)
                user = _admitted_user(request, known)
                request[keys.USER] = user
                # max-in-flight, then authorization inside the slot
                with in_flight_slot(limiter, request, info, user, long_running=long_running):
                    attributes = attributes_of(request)
                    if not _self_review(attributes):
                        authorizer = request.app[keys.AUTHORIZER]
                        decided = authz.decide_now(authorizer, attributes)
                        if decided is None:
                            decided = await _authorize(request, authorizer, attributes)
                        _require_allowed(attributes, *decided)
                    response = await handler(request)
            except errors.APIError as error:
                response = _error_response(request, error)
            except web.HTTPNotFound:
                response = web.Response(
                    status=404,
                    text="404 page not found\n",
                    content_type="text/plain",
                    charset="utf-8",
                )
            except web.HTTPException:
                raise
            except Exception as error:
                if isinstance(error, ConnectionResetError) and _client_gone(request):
                    # A stream whose client hung up mid-answer: nothing to answer and
                    # nobody to answer to; aiohttp drops the connection. Not a server
                    # error.
                    log.debug("client went away: %s %s", request.method, request.path)
                    raise
                log.exception("internal error serving %s %s", request.method, request.path)
                response = responses.status_response(errors.InternalError.wrap(error))
            # kube's WithCacheControl: every answer, errors included, unless a handler chose.
            if "Cache-Control" not in response.headers and not response.prepared:
                response.headers["Cache-Control"] = "no-cache, private"
            code = response.status
            return response
        except web.HTTPException as error:
            code = error.status
            raise
        except asyncio.CancelledError:
            # A watch ends when its client goes away, long after its 200 went out;
            # that is how watches end, not a server error.
            parsed = request.get(keys.REQUEST_INFO)
            if parsed is not None and parsed.verb == "watch":
                code = 200
            raise
        finally:
            _observe(request, code, start)

    return serve


def _observe(request: web.Request, code: int, start: float) -> None:
    """Count the request under its verb (and resource, for resource requests); a watch's
    duration is its client's choice, so it has none."""
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


def _connection_only(request: web.Request) -> bool:
    """True when the identity can come only from the connection's client certificate.

    Then it is the same for every request on the connection, so it is computed once
    per connection. Any bearer token or request-header identity opts out.
    """
    if "Authorization" in request.headers:
        return False
    return not any(name.lower().startswith("x-remote-") for name in request.headers)


class _Unknown:
    """No identity cached for this request's connection: it must be authenticated."""


_UNKNOWN = _Unknown()


def _known_identity(request: web.Request) -> authn.UserInfo | _Unknown | None:
    """The identity already established for the request's connection, without awaiting.

    Keyed by the connection's TLS state: it lives exactly as long as the connection and
    can be weakly referenced with any event loop (uvloop's transports cannot).
    """
    connection = tlsconfig.peer_ssl_object(request)
    if connection is None or not _connection_only(request):
        return _UNKNOWN
    return request.app[keys.CONNECTION_IDENTITIES].get(connection, _UNKNOWN)


async def _authenticate(request: web.Request) -> authn.UserInfo | None:
    """Ask the authenticators; remember a connection-only identity for the connection."""
    try:
        user = await request.app[keys.AUTHENTICATOR].authenticate(request)
    except authn.AuthenticationFailed as error:
        log.info("authentication failed for %s: %s", request.path, error)
        raise errors.Unauthorized("Unauthorized") from error
    connection = tlsconfig.peer_ssl_object(request)
    if connection is not None and _connection_only(request):
        request.app[keys.CONNECTION_IDENTITIES][connection] = user
    return user


def _admitted_user(request: web.Request, user: authn.UserInfo | None) -> authn.UserInfo:
    """The request's user: nobody is refused on the health paths (probes carry no
    credentials, as kube's AlwaysAllowPaths), anywhere else 401."""
    if user is not None:
        return user
    if request.path not in ANONYMOUS_PATHS:
        raise errors.Unauthorized("Unauthorized")
    return authn.UserInfo(name="system:anonymous", groups=("system:unauthenticated",))


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


def _self_review(attributes: authz.Attributes) -> bool:
    return (
        attributes.verb == "create"
        and (attributes.api_group, attributes.resource) in SELF_REVIEWS
        and not attributes.subresource
        and not attributes.name
        and authn.SYSTEM_AUTHENTICATED in attributes.user.groups
    )


async def _authorize(
    request: web.Request, authorizer: authz.Authorizer, attributes: authz.Attributes
) -> tuple[authz.Decision, str]:
    try:
        return await authorizer.authorize(attributes)
    except authz.AuthorizerError as error:
        log.warning("authorization failed for %s: %s", request.path, error)
        raise errors.InternalError(f"Internal error occurred: {error}") from error


def _require_allowed(attributes: authz.Attributes, decision: authz.Decision, reason: str) -> None:
    """kube's 403 for anything but ALLOW."""
    if decision is authz.Decision.ALLOW:
        return
    details = authz.forbidden_status_details(attributes)
    raise errors.Forbidden(
        authz.forbidden_message(attributes, reason=reason),
        name=details.get("name", ""),
        group=details.get("group"),
        kind=details.get("kind", ""),
    )


def in_flight_slot(
    limiter: inflight.InFlightLimiter,
    request: web.Request,
    info: requestinfo.RequestInfo,
    user: authn.UserInfo,
    *,
    long_running: longrunning.LongRunning,
) -> contextlib.AbstractContextManager[None]:
    """The slot a request holds while served (see `inflight`): none for health probes,
    a long-running count for watches and streams, otherwise one of its kind's slots
    (`errors.TooManyRequests` when none is free, unless `system:masters`)."""
    if request.path in ANONYMOUS_PATHS:
        return contextlib.nullcontext()
    if long_running.is_long_running(info, request.query):
        return limiter.running_long()
    privileged = authn.SYSTEM_MASTERS in user.groups
    return limiter.admit(inflight.kind_of(info.verb), privileged=privileged)
