"""Request bodies decoded without holding up the event loop.

One event loop serves every request, so a body that takes long to decode delays
every other request, `/readyz` included. `registry.decoding` bounds what a body can
cost: the 3 MiB limit, at most 100 levels of nesting and a budget for YAML aliases.
Those bounds still leave seconds of work for a large YAML document: PyYAML is pure
Python, about 2 ms a kilobyte. So only small JSON bodies are decoded inline (the C
parser reads 64 KiB in well under a millisecond); YAML, and JSON above that size,
are decoded on a worker thread.

There is one decoding thread per process, not one per request. The GIL is
process-wide: a thread doing pure-Python work hands the interpreter back every
switch interval (5 ms), and the loop waits at most about that long each time it
wants to run as long as it competes with one such thread; with twenty it waits for
several of them in turn. Bodies queue for the thread instead, so a burst of hostile
bodies costs the senders time and leaves everyone else's latency alone. The pool is
created on first use and its idle thread ends with the interpreter.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from typing import Any

from plnt.registry import decoding

INLINE_JSON_BYTES = 64 * 1024
"""JSON bodies up to this size are decoded on the loop: a thread hop costs more."""

_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _decoder() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="plnt-body-decoder"
            )
        return _pool


def decodes_inline(data: bytes, *, content_type: str) -> bool:
    """Whether decoding `data` is cheap enough to do on the event loop."""
    media = decoding.media_type(content_type)
    return media in decoding.JSON_CONTENT_TYPES and len(data) <= INLINE_JSON_BYTES


async def decode(data: bytes, *, content_type: str) -> tuple[Any, list[str]]:
    """`decoding.decode_body`, off the loop unless the body is small JSON.

    Raises what `decode_body` raises (`DecodeError`, `UnsupportedContentType`).
    """
    if decodes_inline(data, content_type=content_type):
        return decoding.decode_body(data, content_type=content_type)
    loop = asyncio.get_running_loop()
    work = functools.partial(decoding.decode_body, data, content_type=content_type)
    return await loop.run_in_executor(_decoder(), work)
