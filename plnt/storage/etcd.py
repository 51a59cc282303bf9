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

Errors: gRPC failures are translated once into `plnt.storage.errors`
(connection errors and timeouts become Unavailable) with the cause chained.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aetcd
from aetcd import rpc
from aetcd import utils as aetcd_utils

from plnt.storage import continuation, errors
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


def _range_end(key: bytes) -> bytes:
    return bytes(aetcd_utils.prefix_range_end(key)) if key else b"\x00"


class EtcdStore:
    """The etcd implementation of `plnt.storage.interface.Store`.

    Use as `async with EtcdStore("http://127.0.0.1:2379", key_prefix="/registry") as s:`
    or call `start()` / `close()`.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        key_prefix: str = "",
        request_timeout: float = 10.0,
        max_update_attempts: int = 32,
        observe: Observe | None = None,
    ) -> None:
        parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        self.endpoint = endpoint
        self.key_prefix = key_prefix
        self._strip = len(key_prefix)
        self._timeout = request_timeout
        self._max_attempts = max_update_attempts
        self._client = aetcd.Client(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 2379,
            timeout=int(request_timeout) or 1,
            options={
                "grpc.max_receive_message_length": _MAX_MESSAGE,
                "grpc.max_send_message_length": _MAX_MESSAGE,
            },
        )
        self._kv: Any = None
        self._observe = observe

    async def start(self) -> None:
        try:
            await self._client.connect()
        except aetcd.exceptions.ClientError as exc:
            raise errors.Unavailable(f"cannot connect to etcd at {self.endpoint}") from exc
        stub = self._client.kvstub
        self._kv = stub if self._observe is None else _TimedKV(stub, self._observe)

    async def close(self) -> None:
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

    async def get(self, key: str) -> KeyValue:
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
    ) -> ListResult:
        full_prefix = (self.key_prefix + prefix).encode()
        start = full_prefix
        if continue_token is not None:
            token_revision, relative_start = continuation.decode(continue_token)
            if revision and revision != token_revision:
                raise errors.InvalidContinue("a continue token cannot be used with a revision")
            revision = token_revision
            start = full_prefix + relative_start.encode()
        request = rpc.RangeRequest(
            key=start, range_end=_range_end(full_prefix), limit=limit, revision=revision
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
        request = rpc.RangeRequest(key=self.key_prefix.encode() or b"\x00", count_only=True)
        try:
            resp = await self._kv.Range(request, timeout=self._timeout)
        except rpc.AioRpcError as exc:
            raise translate_rpc_error(exc) from exc
        return int(resp.header.revision)

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
                raise errors.Conflict(
                    f"key {key!r} is at revision {state.mod_revision}, not {expected_revision}",
                    key=key,
                    current_revision=state.mod_revision,
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
        raise errors.Conflict(
            f"key {key!r} is at revision {kvs[0].mod_revision}, not {expected_revision}",
            key=key,
            current_revision=kvs[0].mod_revision,
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
