"""The runner an API server listens through, with idle connections bounded.

aiohttp keeps an idle keep-alive connection open for about an hour by default, so a
client that opens connections and walks away (or hundreds of them) holds sockets and
TLS state forever. kube-apiserver's HTTP server closes a connection idle for 90 s;
plnt does the same with `ServingLimits.idle_connection_timeout_seconds`.

aiohttp's keep-alive timer runs only while a connection waits for its next request
(from the moment it is accepted, so a connection that never sends a request, or never
finishes one, is closed too). A connection whose handler is running — a watch, a
stream from a runner, a slow list — is not idle, so long-lived streams are never cut.
"""

from __future__ import annotations

from aiohttp import web

from plnt.apiserver import keys


def app_runner(
    application: web.Application, *, shutdown_timeout: float, handler_cancellation: bool = False
) -> web.AppRunner:
    """An `AppRunner` for an application `app.build_app` made, without an access log."""
    limits = application[keys.SETTINGS].limits
    return web.AppRunner(
        application,
        shutdown_timeout=shutdown_timeout,
        handler_cancellation=handler_cancellation,
        access_log=None,
        keepalive_timeout=limits.idle_connection_timeout_seconds,
    )
