"""Who may use the UI server: the per-launch token, its cookie, CSRF and Origin checks.

The server acts with the user's credentials, so anything that can reach it can act as
the user. It listens on loopback only, and on top of that (as Jupyter does):

* the first request must carry `?token=` with the launch's token (the URL `plnt ui`
  prints and opens); it is exchanged for an HttpOnly, SameSite=Strict session cookie and
  the browser is sent to the same URL without the token, so it leaves the address bar
  and history. A wrong or missing token, and no cookie, is a 403 page;
* the `Host` header must name the loopback address and our port (a DNS-rebinding page
  served from elsewhere cannot talk to us even from the user's browser);
* every state-changing request (POST) must come from our own origin (`Origin`) and carry
  the launch's CSRF token in `X-CSRF-Token` (synchronizer pattern: the token is in the
  pages we render, which only our origin can read);
* pages forbid framing and load nothing from elsewhere (`Content-Security-Policy`).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web

from plnt.ui import keys, rendering

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def cookie_name(port: int) -> str:
    """One cookie per port: browsers share cookies across the ports of one host."""
    return f"plnt-ui-{port}"


def _equal(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def _allowed_hosts(request: web.Request) -> set[str]:
    port = request.app[keys.SETTINGS].port
    return {f"127.0.0.1:{port}", f"localhost:{port}"}


def _forbidden(request: web.Request, message: str) -> web.Response:
    return rendering.error_page(request, 403, "Forbidden", message)


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Check host, token or session cookie, and for POSTs the Origin and CSRF token."""
    settings = request.app[keys.SETTINGS]
    if request.host not in _allowed_hosts(request):
        return _forbidden(request, f"this server answers only to 127.0.0.1:{settings.port}")
    name = cookie_name(settings.port)
    token = request.query.get("token")
    if token is not None:
        if not _equal(token, settings.token):
            return _forbidden(request, "the token in the URL is not this launch's token")
        rest = {key: value for key, value in request.query.items() if key != "token"}
        clean = request.rel_url.with_query(rest)
        redirect = web.Response(status=303, headers={"Location": str(clean)})
        redirect.set_cookie(
            name, settings.session, httponly=True, samesite="Strict", path="/", max_age=None
        )
        return redirect
    if not _equal(request.cookies.get(name), settings.session):
        return _forbidden(
            request,
            "open the URL `plnt ui` printed (it carries this launch's token) to use the UI",
        )
    if request.method not in SAFE_METHODS:
        origin = request.headers.get("Origin")
        if origin not in {f"http://{host}" for host in _allowed_hosts(request)}:
            return _forbidden(request, "a state-changing request must come from this UI")
        if not _equal(request.headers.get(CSRF_HEADER), settings.csrf_token):
            return _forbidden(request, "the request carries no valid CSRF token")
    response = await handler(request)
    if not response.prepared:
        for header, value in rendering.HEADERS.items():
            response.headers.setdefault(header, value)
    return response
