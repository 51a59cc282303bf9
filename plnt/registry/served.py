"""Served objects: one decode and at most one JSON encoding per key and resourceVersion.

A key at one mod revision always serves the same object, so GET, LIST and every
watcher of an event share one decoded object instead of parsing the same stored
bytes again, and share one encoding of it instead of serialising the same object
for every answer (kube's watch cache keeps its objects serialised once per encoding
for the same reason). The encoding is made on the first answer that needs it, not on
decode: a LIST with a label selector decodes every object and answers few.

Both live in one bounded LRU keyed by (storage key, mod revision). A new
resourceVersion is a new key, so an answer can never be stale: an update, or a
delete and re-create under the same name, moves the revision. Objects are found
again by identity (`encoded`): only the very object this cache handed out reuses
its bytes, so an object built per request (a copy with another resourceVersion, a
Table, an object a store decorates as it serves it) is encoded as it always was.
An entry keeps its object alive, so an `id` is never reused while the entry exists.

Memory: an entry holds the decoded object and, once answered, its compact JSON (about
the size of its stored value: 0.75 KiB for a new WorkflowRun, against about 4 KiB for
the decoded object).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from plnt.api import codec
from plnt.registry.objects import Object
from plnt.storage.interface import KeyValue


def answer_json(obj: Object) -> bytes:
    """The JSON answer body of a served object (the encoder the cache runs once)."""
    return codec.dumps(obj)


class _Entry:
    __slots__ = ("encoded", "key", "obj")

    def __init__(self, key: tuple[str, int], obj: Object) -> None:
        self.key = key
        self.obj = obj
        self.encoded: bytes | None = None


class ServedObjects:
    """A bounded LRU of served objects and their JSON, keyed by (key, mod revision)."""

    def __init__(self, size: int, decode: Callable[[KeyValue], Object]) -> None:
        self._size = size
        self._decode = decode
        self._entries: OrderedDict[tuple[str, int], _Entry] = OrderedDict()
        self._by_identity: dict[int, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def read(self, kv: KeyValue) -> Object:
        """The served object of `kv`, shared between readers: callers must not mutate it."""
        cache_key = (kv.key, kv.mod_revision)
        entry = self._entries.get(cache_key)
        if entry is not None:
            self._entries.move_to_end(cache_key)
            return entry.obj
        entry = _Entry(cache_key, self._decode(kv))
        self._entries[cache_key] = entry
        self._by_identity[id(entry.obj)] = entry
        if len(self._entries) > self._size:
            _, evicted = self._entries.popitem(last=False)
            del self._by_identity[id(evicted.obj)]
        return entry.obj

    def encoded(self, obj: Object) -> bytes:
        """`obj` as JSON: encoded once while `obj` is the cached object of its revision.

        Byte for byte what encoding `obj` itself gives, so a client cannot tell a
        cached answer from a fresh one.
        """
        entry = self._by_identity.get(id(obj))
        if entry is None or entry.obj is not obj:
            return answer_json(obj)
        if entry.encoded is None:
            entry.encoded = _compact(answer_json(obj))
        return entry.encoded


def _compact(data: bytes) -> bytes:
    """A copy of `data` that holds only its length.

    orjson's result keeps the buffer it was written into (several KiB for an object
    of under one), harmless for an answer that lives one request and ten times the
    object's size for one cached for as long as its resourceVersion is served.
    """
    return memoryview(data).tobytes()
