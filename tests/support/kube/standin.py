"""Running the stand-in: its own thread and event loop, and the handle tests hold.

`running(directory)` starts the server on a free port of 127.0.0.1 (HTTPS with the
stand-in cluster's CA) in a background thread with its own event loop, so one stand-in
can serve synchronous tests (kubectl) and asynchronous ones on any loop, and be shared
by a whole session. The `KubeStandIn` handle is thread-safe: every change to server
state is scheduled onto the server's loop and awaited there.

kube-apiserver's `--request-timeout` is `running(..., request_timeout=60.0)`, and
`KubeStandIn.requests_cut_after(seconds)` changes it for a block (a shared stand-in
keeps its limit for every other test): requests that are not long-running are cut at it
(`timeouts`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ssl
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web
from cryptography import x509

from tests.support.kube import (
    aggregator,
    authconfig,
    certs,
    identity,
    kinds,
    kubelet,
    policy,
    resources,
    reviews,
    server,
    store,
    timeouts,
)
from tests.support.kube.attributes import User

T = TypeVar("T")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class KubeStandIn:
    """A running stand-in: its URL and CA, users, policy, recordings, objects and APIServices."""

    url: str
    pki: certs.ClusterPki
    directory: Path
    state: server.State
    loop: asyncio.AbstractEventLoop

    # --- running on the server's loop ------------------------------------------------

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run `coroutine` on the stand-in's loop and wait for it (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def call_async(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The same from a coroutine on another loop, without blocking that loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    # --- the request timeout ------------------------------------------------------------

    @property
    def request_timeout(self) -> float:
        """Seconds after which a request that is not long-running is cut (kube's
        `--request-timeout`)."""
        return self.state.request_timeout

    def set_request_timeout(self, seconds: float) -> None:
        async def change() -> None:
            self.state.request_timeout = seconds

        self.call(change())

    @contextlib.contextmanager
    def requests_cut_after(self, seconds: float) -> Iterator[None]:
        """Cut requests that are not long-running after `seconds` within the block; the
        limit before it is restored after it, also when the block fails. Requests
        already in flight keep the deadline they started with."""
        before = self.request_timeout
        self.set_request_timeout(seconds)
        try:
            yield
        finally:
            self.set_request_timeout(before)

    # --- identity and policy ----------------------------------------------------------

    @property
    def ca_cert(self) -> Path:
        return self.pki.ca_cert

    @property
    def policy(self) -> policy.Policy:
        return self.state.policy

    def add_user(
        self,
        token: str,
        name: str,
        groups: Iterable[str] = (),
        *,
        uid: str = "",
        extra: Mapping[str, Iterable[str]] | None = None,
    ) -> User:
        return self.state.tokens.add(token, name, groups, uid=uid, extra=extra)

    def allow(self, rule: policy.Rule) -> policy.Rule:
        return self.state.policy.allow(rule)

    def client_certificate(self, name: str, groups: Iterable[str] = ()) -> tuple[Path, Path]:
        """A client certificate for `name` from the cluster's client CA."""
        return self.pki.issue_client(name, tuple(groups))

    @property
    def recorded(self) -> reviews.Recorded:
        return self.state.recorded

    @property
    def subject_access_reviews(self) -> list[dict[str, Any]]:
        return self.state.recorded.snapshot(self.state.recorded.subject_access_reviews)

    @property
    def token_reviews(self) -> list[dict[str, Any]]:
        return self.state.recorded.snapshot(self.state.recorded.token_reviews)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting the stand-in's serving certificate."""
        return ssl.create_default_context(cafile=str(self.pki.ca_cert))

    def write_kubeconfig(self, path: Path, *, token: str, namespace: str = "default") -> Path:
        """A kubeconfig for kubectl: this server, its CA, and a token user."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "standin",
                    "cluster": {"server": self.url, "certificate-authority": str(self.pki.ca_cert)},
                }
            ],
            "users": [{"name": "standin-user", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "standin",
                    "context": {
                        "cluster": "standin",
                        "user": "standin-user",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "standin",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    # --- objects ------------------------------------------------------------------------

    async def _create_namespace(self, name: str) -> None:
        if self.state.store.get("namespaces", "", name) is None:
            self.state.store.create(
                "namespaces",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": name},
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                },
            )

    def add_namespace(self, name: str) -> None:
        self.call(self._create_namespace(name))

    async def _events(self, namespace: str) -> list[dict[str, Any]]:
        return [kinds.CORE_EVENTS.wire(s) for s in self.state.store.list("events", namespace)]

    def events(self, namespace: str = "") -> list[dict[str, Any]]:
        """Stored Events (core/v1 view), in every namespace when none is given."""
        return self.call(self._events(namespace))

    async def _configmap(self) -> dict[str, str]:
        found = self.state.store.get("configmaps", authconfig.NAMESPACE, authconfig.NAME)
        return dict((found or {}).get("data") or {})

    @property
    def authentication_configmap_data(self) -> dict[str, str]:
        return self.call(self._configmap())

    async def _put_configmap(self, data: Mapping[str, str]) -> None:
        current = self.state.store.get("configmaps", authconfig.NAMESPACE, authconfig.NAME)
        obj = authconfig.configmap(dict(data))
        if current is None:
            self.state.store.create("configmaps", obj)
        else:
            current["data"] = dict(data)
            self.state.store.update("configmaps", current)

    def replace_authentication_configmap(self, data: Mapping[str, str]) -> None:
        """Write new data into kube-system/extension-apiserver-authentication (watchers see it)."""
        self.call(self._put_configmap(data))

    def rotate_front_proxy_ca(self) -> None:
        """A new front-proxy CA and client certificate; the ConfigMap and proxy follow."""
        certs.rotate_front_proxy(self.pki)
        data = self.authentication_configmap_data
        data["requestheader-client-ca-file"] = self.pki.front_proxy_ca_cert.read_text()
        self.replace_authentication_configmap(data)

    # --- workloads --------------------------------------------------------------------

    def start_kubelet(self, nodes: Iterable[dict[str, Any]], **options: Any) -> kubelet.Kubelet:
        """Register `nodes` and run the kubelet simulator until the stand-in stops.

        Its processes are stopped when the stand-in stops, also when a test failed;
        `await kube.call_async(simulator.close())` stops them earlier.
        """

        async def start() -> kubelet.Kubelet:
            simulator = kubelet.Kubelet(self.state, self.directory / "kubelet", **options)
            self.state.closers.append(simulator.close)
            await simulator.start(list(nodes))
            return simulator

        return self.call(start())

    # --- aggregation ------------------------------------------------------------------

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.pki.front_proxy_ca_cert

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.pki.front_proxy_client_cert

    @property
    def front_proxy_client_key(self) -> Path:
        return self.pki.front_proxy_client_key

    def use_proxy_client_certificate(self, cert: Path, key: Path) -> None:
        """Present this front-proxy client certificate (e.g. one made by the backend's CA)."""
        self.state.aggregator.client_cert, self.state.aggregator.client_key = cert, key

    def _apiservice(self, url: str, ca_bundle: bytes, **options: Any) -> aggregator.APIService:
        return aggregator.APIService(
            group=options.pop("group", "plnt.work"),
            version=options.pop("version", "v1"),
            url=url,
            ca_bundle=ca_bundle,
            **options,
        )

    def register_apiservice(
        self, url: str, ca_bundle: bytes, **options: Any
    ) -> aggregator.APIService:
        """Register (and probe) an APIService; call from synchronous code only."""
        return self.call(
            self.state.aggregator.register(self._apiservice(url, ca_bundle, **options))
        )

    async def register_apiservice_async(
        self, url: str, ca_bundle: bytes, **options: Any
    ) -> aggregator.APIService:
        """The same from a coroutine (e.g. when the backend runs on the caller's loop)."""
        return await self.call_async(
            self.state.aggregator.register(self._apiservice(url, ca_bundle, **options))
        )

    def unregister_apiservice(self, group: str = "plnt.work", version: str = "v1") -> None:
        self.state.aggregator.unregister(group, version)


def _serve(
    directory: Path,
    started: concurrent.futures.Future[KubeStandIn],
    stop: list[Callable[[], object]],
    request_timeout: float,
) -> None:
    async def main() -> None:
        pki = certs.create(directory / "pki")
        storage = store.Store()
        state = server.State(
            store=storage,
            resources=resources.Resources(storage),
            tokens=identity.Tokens(),
            policy=policy.Policy(),
            recorded=reviews.Recorded(),
            aggregator=aggregator.Aggregator(
                client_cert=pki.front_proxy_client_cert, client_key=pki.front_proxy_client_key
            ),
            client_ca=x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()),
            request_timeout=request_timeout,
        )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pki.serving_cert, pki.serving_key)
        context.load_verify_locations(cafile=str(pki.ca_cert))
        context.verify_mode = ssl.CERT_OPTIONAL
        runner = web.AppRunner(
            server.build_app(state), handler_cancellation=True, shutdown_timeout=1
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
            await site.start()
            host, port = runner.addresses[0][:2]
            state.server_address = f"{host}:{port}"
            handle = KubeStandIn(
                f"https://{host}:{port}", pki, directory, state, asyncio.get_running_loop()
            )
            for name in DEFAULT_NAMESPACES:
                await handle._create_namespace(name)
            await handle._put_configmap(
                authconfig.data(
                    client_ca=pki.ca_cert.read_text(),
                    requestheader_ca=pki.front_proxy_ca_cert.read_text(),
                )
            )
            stopped = asyncio.Event()
            stop.append(lambda: handle.loop.call_soon_threadsafe(stopped.set))
            started.set_result(handle)
            await stopped.wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(main())
    except BaseException as error:  # reported to the starting thread
        if not started.done():
            started.set_exception(error)
        raise


@contextlib.contextmanager
def running(
    directory: Path,
    *,
    start_timeout: float = 30.0,
    request_timeout: float = timeouts.DEFAULT_REQUEST_TIMEOUT,
) -> Iterator[KubeStandIn]:
    """Start a stand-in keeping its files under `directory`; stop it on exit.

    `request_timeout` is kube-apiserver's `--request-timeout` (60 s by default)."""
    started: concurrent.futures.Future[KubeStandIn] = concurrent.futures.Future()
    stop: list[Callable[[], object]] = []  # filled by the server thread once it runs
    thread = threading.Thread(
        target=_serve,
        args=(directory, started, stop, request_timeout),
        name="kube-standin",
        daemon=True,
    )
    thread.start()
    try:
        yield started.result(start_timeout)
    finally:
        for request_stop in stop:
            request_stop()
        thread.join(timeout=10)
