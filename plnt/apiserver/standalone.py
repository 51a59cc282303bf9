"""Standalone mode (`plnt up`): etcd as a child process, the API server on loopback, a kubeconfig.

Everything lives in one state directory, so a restart with the same directory
finds the same objects, certificates and kubeconfig:

    DIR/etcd/         etcd's data (and DIR/etcd.log)
    DIR/pki/          CA, serving and admin client certificates
    DIR/kubeconfig    admin credentials for kubectl

On SIGINT/SIGTERM the server stops accepting, closes watches, then etcd is
stopped and reaped; nothing is left running.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from aiohttp import web

from plnt.apiserver import app as app_module
from plnt.apiserver import authn, authz, pki
from plnt.apiserver.settings import ServerSettings
from plnt.storage.etcd_process import EtcdProcess, EtcdProcessError

log = logging.getLogger("plnt.standalone")


class StandaloneError(Exception):
    """`plnt up` cannot start: the message says why in one line (port taken, etcd failed)."""


@dataclass(frozen=True, slots=True)
class StandaloneSettings:
    """What `plnt up` was asked for."""

    state_dir: Path
    host: str = "127.0.0.1"
    port: int = 6443
    etcd_client_port: int = 0
    token_file: Path | None = None
    policy_file: Path | None = None


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, *, server: str, paths: pki.Pki) -> None:
    """A kubeconfig with the admin client certificate inlined (context `plnt`)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "plnt",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": _b64(paths.ca_cert),
                },
            }
        ],
        "users": [
            {
                "name": "plnt-admin",
                "user": {
                    "client-certificate-data": _b64(paths.admin_cert),
                    "client-key-data": _b64(paths.admin_key),
                },
            }
        ],
        "contexts": [
            {
                "name": "plnt",
                "context": {"cluster": "plnt", "user": "plnt-admin", "namespace": "default"},
            }
        ],
        "current-context": "plnt",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


async def serve(
    settings: StandaloneSettings,
    *,
    stop: asyncio.Event,
    on_ready: Callable[[str, Path], None] | None = None,
) -> None:
    """Run etcd and the API server until `stop` is set, then shut both down."""
    state = settings.state_dir
    state.mkdir(parents=True, exist_ok=True)
    try:  # refuse bad input before anything starts
        if settings.policy_file is not None:
            authz.load_policy(settings.policy_file)
        if settings.token_file is not None:
            authn.TokenFileAuthenticator.from_file(settings.token_file)
        paths = pki.ensure_pki(state / "pki")
    except (authz.PolicyError, authn.TokenFileError, pki.PkiError) as error:
        raise StandaloneError(str(error)) from error
    etcd = EtcdProcess(state / "etcd", client_port=settings.etcd_client_port)
    try:
        await etcd.astart()
    except EtcdProcessError as error:
        raise StandaloneError(f"etcd did not start: {error}") from error
    try:
        await _serve_api(
            settings, etcd_endpoint=etcd.endpoint, paths=paths, stop=stop, on_ready=on_ready
        )
    finally:
        await etcd.astop()


async def _serve_api(
    settings: StandaloneSettings,
    *,
    etcd_endpoint: str,
    paths: pki.Pki,
    stop: asyncio.Event,
    on_ready: Callable[[str, Path], None] | None,
) -> None:
    state = settings.state_dir
    server_settings = ServerSettings(
        etcd_endpoints=(etcd_endpoint,),
        host=settings.host,
        port=settings.port,
        pki_dir=state / "pki",
        token_file=settings.token_file,
        policy_file=settings.policy_file,
    )
    application = app_module.build_app(server_settings)
    ssl_context = app_module.ssl_context_for(server_settings)
    runner = web.AppRunner(
        application, shutdown_timeout=2.0, access_log=None, handler_cancellation=True
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port, ssl_context=ssl_context)
        try:
            await site.start()
        except OSError as error:
            reason = (os.strerror(error.errno) if error.errno else str(error)).lower()
            raise StandaloneError(
                f"cannot listen on {settings.host}:{settings.port}: {reason}"
            ) from error
        server = f"https://{settings.host}:{settings.port}"
        kubeconfig = state / "kubeconfig"
        write_kubeconfig(kubeconfig, server=server, paths=paths)
        if on_ready is not None:
            on_ready(server, kubeconfig)
        await stop.wait()
    finally:
        await runner.cleanup()


def run(settings: StandaloneSettings, *, on_ready: Callable[[str, Path], None]) -> None:
    """Blocking entry point for the CLI: serve until SIGINT or SIGTERM."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            await serve(settings, stop=stop, on_ready=on_ready)
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(Exception):
                    loop.remove_signal_handler(signum)

    asyncio.run(main())
