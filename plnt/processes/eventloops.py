"""Which asyncio event loop plnt's long-running processes run on: uvloop or asyncio's own.

Why a choice: uvloop (libuv's loop behind asyncio's interface) costs less CPU per
wake-up, per socket write and per TLS record than asyncio's selector loop, and the API
server, the runner and the worker are all wake-up-bound when requests arrive one at a
time (`docs/benchmarks.md`, round 4). It is a compiled extension, though, so a machine
without a wheel for it must still run plnt: when uvloop cannot be imported the standard
loop is used, silently under the default and with one warning when it was asked for.

`PLNT_EVENT_LOOP` chooses: `uvloop`, `asyncio`, or `auto` (the default: uvloop when it
is installed). Anything else is refused with a message naming the variable.

Errors: `ValueError` for an unknown `PLNT_EVENT_LOOP`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")

ENV = "PLNT_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")
DEFAULT = "auto"

Loop = Literal["uvloop", "asyncio"]

_log = logging.getLogger(__name__)


def requested(environ: dict[str, str] | None = None) -> str:
    """The loop `PLNT_EVENT_LOOP` asks for (`auto` when unset or empty)."""
    value = (os.environ if environ is None else environ).get(ENV, "").strip().lower()
    if not value:
        return DEFAULT
    if value not in CHOICES:
        raise ValueError(f"{ENV}={value!r}: expected one of {', '.join(CHOICES)}")
    return value


def uvloop_available() -> bool:
    """True when uvloop can be imported here."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def chosen(environ: dict[str, str] | None = None) -> Loop:
    """The loop this process will run: the request, or asyncio's when uvloop is missing."""
    want = requested(environ)
    if want == "asyncio":
        return "asyncio"
    if uvloop_available():
        return "uvloop"
    if want == "uvloop":
        _log.warning("%s=uvloop but uvloop is not installed: using asyncio's own loop", ENV)
    return "asyncio"


def loop_factory(loop: Loop | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory of new event loops of the chosen kind (for `asyncio.Runner`)."""
    if (loop or chosen()) == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], *, loop: Loop | None = None) -> T:
    """`asyncio.run(main)` on the chosen loop (`PLNT_EVENT_LOOP`, else uvloop if present)."""
    try:
        factory = loop_factory(loop)
    except BaseException:
        main.close()  # never awaited: closed, so no "never awaited" warning on top
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
