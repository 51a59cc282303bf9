"""One etcd watch stream per `EtcdStore.watch`, driven on aetcd's gRPC channel.

Why not aetcd's own `watch_prefix`: it multiplexes every watch on one stream,
drops the response header (so progress notifications never reach the caller)
and swallows compaction into a generic error. Here each watch owns its gRPC
stream (`Watch` RPC from aetcd's generated stubs), so the caller sees exactly:

* every event with revision > `after_revision`, in order, without gaps, with
  etcd's `prev_kv` so DELETED carries the last value and MODIFIED/DELETED carry
  `prev` (absent only when that value was already compacted);
* PROGRESS events built from etcd's periodic progress notifications, which etcd
  sends on an idle watch through the same channel as events (so a progress
  revision never overtakes an undelivered event). The period is the server's
  `--experimental-watch-progress-notify-interval`; `progress_interval` only
  thins them out. `request_progress()` asks etcd for one now (a
  `WatchProgressRequest` on this stream); the caller must only use it on etcd
  releases whose answer cannot overtake pending events
  (`EtcdStore.supports_progress_requests`: 3.5.13+, 3.4.31+).
* `errors.Expired` from the iterator once etcd reports the start revision as
  compacted, `errors.Unavailable` when the stream breaks. Callers resume by
  watching again from the last revision they saw.
"""

from __future__ import annotations

import asyncio
import collections
import time
from types import TracebackType
from typing import Any

from aetcd import rpc

from plnt.storage import errors
from plnt.storage.interface import KeyValue, WatchEvent

_PUT = 0
_READ_AHEAD = 1024
"""Events read ahead of the consumer at most; beyond, gRPC's flow control holds etcd back."""


def translate_rpc_error(exc: Any, *, key: str = "") -> errors.StorageError:
    """The storage error for a gRPC failure; the caller chains `exc` as the cause."""
    code, details = exc.code(), exc.details() or ""
    if code in (
        rpc.StatusCode.UNAVAILABLE,
        rpc.StatusCode.DEADLINE_EXCEEDED,
        rpc.StatusCode.CANCELLED,
    ):
        return errors.Unavailable(f"etcd unavailable: {details}", key=key)
    if "compacted" in details:
        return errors.Expired(f"etcd: {details}", revision=0, compacted_revision=0)
    if "future revision" in details:
        return errors.TooLargeRevision(f"etcd: {details}", revision=0, current_revision=0)
    return errors.StorageError(f"etcd {code.name}: {details}", key=key)


class EtcdWatch:
    """An async context manager that is its own async iterator of `WatchEvent`."""

    def __init__(
        self,
        channel: Any,
        *,
        key: bytes,
        range_end: bytes,
        after_revision: int,
        strip: int,
        progress_interval: float | None,
        open_timeout: float,
        metadata: Any = None,
    ) -> None:
        self._stub = rpc.WatchStub(channel)
        self._key = key
        self._range_end = range_end
        self._after = after_revision
        self._strip = strip
        self._progress_interval = progress_interval
        self._open_timeout = open_timeout
        self._metadata = metadata
        self._call: Any = None
        self._buffer: collections.deque[WatchEvent] = collections.deque()
        self._reader: asyncio.Task[None] | None = None
        self._arrived = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._failure: errors.StorageError | None = None
        self._last_emit = time.monotonic()
        self.last_revision = after_revision
        self._write_lock = asyncio.Lock()

    async def __aenter__(self) -> EtcdWatch:
        create = rpc.WatchCreateRequest(
            key=self._key,
            range_end=self._range_end,
            start_revision=self._after + 1,
            prev_kv=True,
            progress_notify=self._progress_interval is not None,
        )
        self._call = self._stub.Watch(metadata=self._metadata)
        try:
            await self._call.write(rpc.WatchRequest(create_request=create))
            async with asyncio.timeout(self._open_timeout):
                first = await self._read()
        except TimeoutError as exc:
            self._close()
            raise errors.Unavailable("etcd did not confirm the watch in time") from exc
        except rpc.AioRpcError as exc:
            self._close()
            raise translate_rpc_error(exc) from exc
        except BaseException:
            self._close()
            raise
        if not isinstance(first, rpc.WatchResponse) or not first.created:
            self._close()
            raise errors.Unavailable("etcd closed the watch stream before creating the watch")
        self._take(first)
        self._reader = asyncio.create_task(self._read_ahead(self._call), name="etcd watch reader")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()

    async def request_progress(self) -> None:
        """Ask etcd for a progress notification on this stream (answered as PROGRESS).

        Only for etcd releases that answer in order with events (see module doc).
        A stream that has ended ignores the request.
        """
        call = self._call
        if call is None:
            return
        async with self._write_lock:
            try:
                await call.write(rpc.WatchRequest(progress_request=rpc.WatchProgressRequest()))
            except (rpc.AioRpcError, asyncio.InvalidStateError) as exc:
                raise errors.Unavailable("the watch stream ended") from exc

    def __aiter__(self) -> EtcdWatch:
        return self

    async def __anext__(self) -> WatchEvent:
        while not self._buffer:
            if self._failure is not None:
                raise self._failure
            if self._call is None or self._reader is None or self._reader.done():
                raise StopAsyncIteration
            self._arrived.clear()
            await self._arrived.wait()
        event = self._buffer.popleft()
        if len(self._buffer) < _READ_AHEAD:
            self._room.set()
        return event

    async def _read_ahead(self, call: Any) -> None:
        """Read responses into the buffer as they arrive, ahead of the consumer.

        Why: each gRPC read takes several turns of the event loop and etcd sends one
        response per revision; reading the next response only once the consumer
        asked for it made a busy consumer (the watch cache fanning out to many
        watchers) fall behind etcd by one response per busy turn. Read ahead, the
        consumer takes everything that arrived meanwhile in one go. At most
        `_READ_AHEAD` events wait here, so a consumer that stops reading still holds
        etcd back through gRPC's flow control. A failure is raised to the consumer
        after the events read before it.
        """
        try:
            while True:
                while len(self._buffer) >= _READ_AHEAD:
                    self._room.clear()
                    await self._room.wait()
                response = await call.read()
                if not isinstance(response, rpc.WatchResponse):
                    raise errors.Unavailable("etcd ended the watch stream")
                self._take(response)
                self._arrived.set()
        except rpc.AioRpcError as exc:
            failure = translate_rpc_error(exc)
            failure.__cause__ = exc
            self._failure = failure
        except errors.StorageError as exc:
            self._failure = exc
        except asyncio.CancelledError:  # the RPC was cancelled by `_close`
            pass
        finally:
            self._close()
            self._arrived.set()

    async def _read(self) -> Any:
        # grpc.aio does not reliably deliver a task cancellation into a pending read
        # (the task can stay "cancelling" forever), so the read runs shielded and a
        # cancellation cancels the RPC itself, which always ends the read.
        reader = asyncio.ensure_future(self._call.read())
        try:
            return await asyncio.shield(reader)
        except asyncio.CancelledError:
            self._close()
            reader.add_done_callback(_retrieve)
            raise

    def _close(self) -> None:
        if self._call is not None:
            self._call.cancel()
            self._call = None
        # The read-ahead task ends by itself: cancelling the RPC always ends its read.

    def _take(self, response: Any) -> None:
        if response.canceled or response.compact_revision:
            self._close()
            if response.compact_revision:
                raise errors.Expired(
                    f"revision {self._after} has been compacted"
                    f" (compacted up to {response.compact_revision})",
                    revision=self._after,
                    compacted_revision=response.compact_revision,
                )
            raise errors.Unavailable(f"etcd cancelled the watch: {response.cancel_reason}")
        strip = self._strip
        append = self._buffer.append
        for event in response.events:
            kv = event.kv
            key = kv.key.decode()[strip:]
            raw_prev = event.prev_kv
            prev = (
                KeyValue(key, raw_prev.value, raw_prev.mod_revision, raw_prev.create_revision)
                if raw_prev.mod_revision
                else None
            )
            if event.type == _PUT:
                append(
                    WatchEvent(
                        "ADDED" if kv.version == 1 else "MODIFIED",
                        kv.mod_revision,
                        KeyValue(key, kv.value, kv.mod_revision, kv.create_revision),
                        prev,
                    )
                )
            else:
                # A DELETED event's kv is the last value, stamped with the delete revision.
                append(
                    WatchEvent(
                        "DELETED",
                        kv.mod_revision,
                        KeyValue(key, raw_prev.value, kv.mod_revision, raw_prev.create_revision),
                        prev,
                    )
                )
        if response.events:
            self.last_revision = response.events[-1].kv.mod_revision
            self._last_emit = time.monotonic()
        elif not response.created and self._progress_interval is not None:
            revision = response.header.revision
            now = time.monotonic()
            if revision > self.last_revision or now - self._last_emit >= self._progress_interval:
                self.last_revision = max(self.last_revision, revision)
                self._last_emit = now
                append(WatchEvent("PROGRESS", self.last_revision))


def _retrieve(reader: asyncio.Future[Any]) -> None:
    if not reader.cancelled():
        reader.exception()
