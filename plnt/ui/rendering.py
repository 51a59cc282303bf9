"""Templates to HTML: the Jinja2 environment, whole pages, fragments, and error pages.

One environment per app, autoescaping on: every value from the API (names, messages)
is text, never markup. Undefined is strict: templates read the typed views of `views`,
`runs`, `evaluations`, `benches` and `invocations`, never an API object, so a name no
view has is a typo, and it fails the page tests instead of printing nothing. Pages and
the fragments the live streams send come from the same templates (a fragment is a
template `{% include %}`d by its page), so a live update looks exactly like a reload.
"""

from __future__ import annotations

from typing import Any

import jinja2
from aiohttp import web

from plnt.ui import keys

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def environment() -> jinja2.Environment:
    """The templates shipped in `plnt/ui/templates`, autoescaped, undefined strict."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("plnt.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # Pages call the Kubernetes namespace `namespace`: Jinja's helper of that name must
    # never stand in for one a fragment was not given.
    del env.globals["namespace"]
    return env


def fragment(request: web.Request, template: str, **context: Any) -> str:
    """One template rendered to text (a page's part, for a live update)."""
    return request.app[keys.TEMPLATES].get_template(template).render(**context)


def page(request: web.Request, template: str, *, status: int = 200, **context: Any) -> web.Response:
    """A whole page: the template with what every page needs (CSRF token, namespace)."""
    settings = request.app[keys.SETTINGS]
    context.setdefault("namespace", request.match_info.get("namespace", ""))
    context.setdefault("run_name", request.match_info.get("name", ""))
    text = fragment(request, template, csrf_token=settings.csrf_token, **context)
    return web.Response(
        status=status, text=text, content_type="text/html", charset="utf-8", headers=HEADERS
    )


def error_page(request: web.Request, status: int, reason: str, message: str) -> web.Response:
    """A page that says what went wrong, in the API's own words when it answered."""
    text = fragment(
        request,
        "error.html",
        status=status,
        reason=reason,
        message=message,
        csrf_token="",
        namespace="",
        run_name="",
    )
    return web.Response(
        status=status, text=text, content_type="text/html", charset="utf-8", headers=HEADERS
    )
