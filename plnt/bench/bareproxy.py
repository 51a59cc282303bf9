"""A bare aiohttp proxy: the floor under the API server's invoke proxy.

It forwards `POST /invoke` to one upstream runner over a pooled plain-HTTP session and
answers the runner's status and body: no authentication, no authorization, no reading
of the WorkflowRun, no balancing, no log. The deploy saga benchmark measures it beside
the API server, so the report can tell the cost of any Python HTTP hop on the machine
from the cost of what plnt adds to it.

It also relays `POST /v1/…` to the same path upstream, its answer streamed back chunk by
chunk as it arrives: in front of a model server (or of another bare proxy), that is the
floor under a streamed completion's hops through the runner and the API server, which
the model benchmark measures as `relay` and `relays`.

It runs on the event loop plnt's servers run on (`plnt.processes.signals.
run_until_signalled`: uvloop unless `PLNT_EVENT_LOOP` says otherwise), so the floor and
the API server differ in what they do, not in their loop.

By default it serves plain HTTP. With `--tls-cert` and `--tls-key` (the API server's own
serving certificate and key) it serves HTTPS the way the API server does: TLS 1.2 or
newer, ALPN `http/1.1`, but no client certificate is requested. That floor separates
what TLS costs (the API server must speak it: kubectl uses HTTPS) from what plnt's own
code costs.

    python -m plnt.bench.bareproxy --upstream http://127.0.0.1:PORT --port 0 \
        [--tls-cert serving.crt --tls-key serving.key]

prints `bare proxy listening on http://127.0.0.1:PORT` (`https://…` with TLS) once it
accepts connections. Errors: `ssl.SSLError` or `OSError` when the key pair cannot be
loaded, before anything is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from aiohttp import web

from plnt.processes import signals

UPSTREAM: web.AppKey[str] = web.AppKey("upstream", str)
SESSION: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)


async def _session(app: web.Application) -> AsyncIterator[None]:
    app[SESSION] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    yield
    await app[SESSION].close()


async def _invoke(request: web.Request) -> web.Response:
    body = await request.read()
    async with request.app[SESSION].post(
        request.app[UPSTREAM] + "/invoke", data=body, headers={"Content-Type": "application/json"}
    ) as upstream:
        answer = await upstream.read()
        return web.Response(status=upstream.status, body=answer, content_type="application/json")


async def _relay(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    async with request.app[SESSION].post(
        request.app[UPSTREAM] + request.path,
        data=body,
        headers={"Content-Type": "application/json"},
    ) as upstream:
        response = web.StreamResponse(status=upstream.status)
        response.content_type = upstream.content_type
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


def build_app(upstream: str) -> web.Application:
    """The proxy app forwarding `POST /invoke` to `{upstream}/invoke` and relaying
    `POST /v1/…` to `{upstream}/v1/…`."""
    app = web.Application()
    app[UPSTREAM] = upstream.rstrip("/")
    app.cleanup_ctx.append(_session)
    app.router.add_post("/invoke", _invoke)
    app.router.add_post("/v1/{tail:.+}", _relay)
    return app


def server_ssl_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server context like the API server's, minus the client certificate request."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile=cert, keyfile=key)
    context.set_alpn_protocols(["http/1.1"])
    return context


async def _serve(
    upstream: str, port: int, *, tls: ssl.SSLContext | None, stop: asyncio.Event
) -> None:
    """Serve until `stop` is set (SIGINT, SIGTERM)."""
    runner = web.AppRunner(build_app(upstream), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=tls)
        await site.start()
        host, bound = runner.addresses[0][:2]
        scheme = "https" if tls is not None else "http"
        print(f"bare proxy listening on {scheme}://{host}:{bound}", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument(
        "--upstream", required=True, help="base URL of the runner, model server or bare proxy"
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks one")
    parser.add_argument("--tls-cert", type=Path, help="serve HTTPS with this PEM certificate")
    parser.add_argument("--tls-key", type=Path, help="the PEM private key of --tls-cert")
    args = parser.parse_args()
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    tls = server_ssl_context(args.tls_cert, args.tls_key) if args.tls_cert else None
    signals.run_until_signalled(lambda stop: _serve(args.upstream, args.port, tls=tls, stop=stop))


if __name__ == "__main__":
    main()
