"""The model server's instrumentation layer (`plnt.processes.llamaserving.instrument`) keeps
backend probes out of the callers' figures: driven through ASGI with a generation that
waits for the test, so what is counted while a call is in flight can be read."""

from __future__ import annotations

import asyncio
from typing import Any

from plnt.api.headers import PROBE_HEADER
from plnt.processes import llamaserving


class HeldGeneration:
    """An ASGI app whose generation answers once `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.started.set()
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _scope(*, probe: bool) -> dict[str, Any]:
    headers = [(b"content-type", b"application/json")]
    if probe:
        headers.append((PROBE_HEADER.lower().encode(), b"ttft"))
    return {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": headers}


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"{}", "more_body": False}


async def _send(message: Any) -> None:
    return None


async def test_a_probe_in_flight_is_neither_running_nor_waiting_nor_a_request_when_done() -> None:
    load = llamaserving.Load()
    held = HeldGeneration()
    app = llamaserving.instrument(held, aliases=["m"], load=load)
    call = asyncio.create_task(app(_scope(probe=True), _receive, _send))
    await asyncio.wait_for(held.started.wait(), 5)
    assert (load.running, load.waiting, load.in_flight) == (0, 0, 0)
    held.release.set()
    await asyncio.wait_for(call, 5)
    assert (load.finished, load.probes) == (0, 1)
    text = llamaserving.metrics_text(load, model="m")
    assert 'plnt_model_requests_total{model="m"} 0' in text
    assert 'plnt_model_probes_total{model="m"} 1' in text


async def test_a_callers_call_of_the_same_shape_is_counted_as_a_request() -> None:
    load = llamaserving.Load()
    held = HeldGeneration()
    app = llamaserving.instrument(held, aliases=["m"], load=load)
    call = asyncio.create_task(app(_scope(probe=False), _receive, _send))
    await asyncio.wait_for(held.started.wait(), 5)
    assert (load.running, load.waiting) == (1, 0)
    held.release.set()
    await asyncio.wait_for(call, 5)
    assert (load.finished, load.probes, load.in_flight) == (1, 0, 0)
