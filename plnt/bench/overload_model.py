"""The real model as the overload benchmark's target (`python -m plnt.bench overload --model`).

plnt's own model server on the pinned Gemma (`plnt.processes.modelserver`, started as
`plnt up --model` starts it), one for the whole benchmark: loading it takes seconds, and
every run must meet the same model. Its capacity is measured once, straight on the server:
answers of a fixed number of tokens, one at a time, after one that warms it.

Generations are the server's own figures (`GET /metrics`, `plnt.processes.llamaserving`):
the requests it finished plus those still running or waiting, that is every request it
accepted, counted from the run's start. A run ends only when the model is idle again, so
the backlog an unguarded run leaves (llama.cpp generates for callers who have gone) is
neither counted in the next run nor slows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from plnt.bench import continuations
from plnt.bench.overload import Target
from plnt.processes import models, weights
from plnt.processes.modelserver import ModelServer

PIN = models.GEMMA3_270M
CALIBRATION_CALLS = 5
IDLE_SECONDS = 600.0
"""The longest a run waits for the model to finish what the load left it."""


async def _figures(session: aiohttp.ClientSession, server: ModelServer) -> dict[str, float]:
    """The server's `plnt_model_*` samples by name (one model: one sample each)."""
    async with session.get(f"{server.root}/metrics") as answer:
        answer.raise_for_status()
        text = await answer.text()
    figures = {}
    for line in text.splitlines():
        if line.startswith("plnt_model_"):
            name, value = line.rsplit(" ", 1)
            figures[name.split("{", 1)[0]] = float(value)
    return figures


async def accepted(session: aiohttp.ClientSession, server: ModelServer) -> int:
    """Generation requests the server has taken in: finished, running and waiting."""
    figures = await _figures(session, server)
    return int(
        figures["plnt_model_requests_total"]
        + figures["plnt_model_requests_running"]
        + figures["plnt_model_requests_waiting"]
    )


async def until_idle(session: aiohttp.ClientSession, server: ModelServer) -> None:
    """Wait until the model runs and queues nothing (at most `IDLE_SECONDS`)."""
    async with asyncio.timeout(IDLE_SECONDS):
        while True:
            figures = await _figures(session, server)
            if figures["plnt_model_requests_running"] + figures["plnt_model_requests_waiting"] == 0:
                return
            await asyncio.sleep(0.1)  # polling the server's gauges


@dataclass(frozen=True)
class RealModel:
    """The started model server and its measured service time."""

    server: ModelServer
    tokens: int
    service_seconds: float

    @classmethod
    @contextlib.contextmanager
    def started(cls, workdir: Path, *, tokens: int) -> Iterator[RealModel]:
        """The pinned model served and measured; stopped (by its PID) on the way out."""
        weights.require_extra(PIN)
        server = ModelServer(PIN, weights.assemble(PIN), log_file=workdir / "model.log")
        try:
            asyncio.run(server.astart())
            service = asyncio.run(_measure(server, tokens))
            yield cls(server, tokens, service)
        finally:
            server.stop()

    def describe(self) -> str:
        return (
            f"model {PIN.name}: one answer of {self.tokens} tokens in "
            f"{self.service_seconds * 1000:.0f} ms alone, "
            f"capacity {1.0 / self.service_seconds:.2f} calls/s"
        )

    @contextlib.asynccontextmanager
    async def target(self) -> AsyncIterator[Target]:
        """The model for one run, idle at its start and again at its end."""
        server = self.server
        async with aiohttp.ClientSession() as session:
            await until_idle(session, server)
            base = await accepted(session, server)

            async def generations() -> int:
                return await accepted(session, server) - base

            yield Target(
                endpoint=server.endpoint,
                model=server.model,
                spec=continuations.spec_text(self.tokens),
                service_seconds=self.service_seconds,
                generations=generations,
                inputs=_inputs,
            )
            await until_idle(session, server)


def _inputs(index: int) -> dict[str, Any]:
    return {"prefix": continuations.PROMPT}


async def _measure(server: ModelServer, tokens: int) -> float:
    """The mean time of one answer of `tokens` tokens, alone on the model."""
    body = {
        "model": server.model,
        "prompt": continuations.PROMPT,
        "max_tokens": tokens,
        "temperature": 0,
        "seed": 0,
    }
    durations = []
    async with aiohttp.ClientSession() as session:
        for call in range(CALIBRATION_CALLS + 1):
            began = time.perf_counter()
            async with session.post(f"{server.endpoint}/completions", json=body) as answer:
                answer.raise_for_status()
                await answer.read()
            if call:  # the first warms the model
                durations.append(time.perf_counter() - began)
    return sum(durations) / len(durations)
