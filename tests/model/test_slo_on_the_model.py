"""`spec.slo` held on the real model: the pinned Gemma behind the deploy tests' stack.

A run with time-to-first-token and time-per-output-token objectives the model meets on this
machine is promoted through a canary analysis held to them; its live attainment
(`status.slo`, judged by the API server on the calls it relays) is met while the model is
idle and falls when the model is slowed by a long generation it must finish first (the
model server answers one request at a time); the same canary held to an objective no
machine meets is rolled back as `SLOMissed`, naming the canary's figure and the stable's.

What "meets on this machine" means is calibrated first, straight from the model server: the
objective is many times one short answer's duration, and the slowing generation several
times the objective. Those durations only choose the parameters; every assertion is on
statuses, reasons and the figures the messages carry, never on how fast this machine is.
The tests run in file order on one module fixture (the rollback last: it leaves the run's
objective unmeetable).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import yaml

from plnt.bench import continuations
from plnt.client import transport
from plnt.client.clients import PlntClient
from plnt.processes.modelserver import ModelServer
from plnt.standalone import modelserving
from tests.support.blocking_api import Api
from tests.support.manifests import workflowrun
from tests.support.model import COUNTING, PIN
from tests.support.namespaces import create_namespace
from tests.support.plnt_server import wait_for
from tests.support.stack import Stack
from tests.support.statuses import condition_of, settled, step_of

NAME = "held-on-the-model"
TOKENS = 8
"""Tokens per answer: short, so a canary analysis on a one-at-a-time model stays quick."""
SPEC = continuations.spec_text(TOKENS, smoke=True)
ANALYSIS = {"requests": 4}
"""Only the objectives judge the canary: the analysis's own limits are left out."""
NEVER_MET_MS = 1
"""A first token within 1 ms through an API server, a runner and a model: no machine."""
END_OF_GENERATION = {"1": -100, "106": -100, "212": -100}
"""The pinned Gemma's end-of-generation tokens, banned so the slowing answer runs its length."""
MAX_SLOWING_TOKENS = 1800
"""Below the model server's context (2048) with the prompt."""


@dataclass(frozen=True)
class Calibration:
    """What this machine's model does, measured straight on the model server."""

    answer_ms: float
    """One `TOKENS`-token streamed answer, end to end."""
    per_token_ms: float

    @property
    def objective_ms(self) -> int:
        """A first token this machine gives an idle model's caller with room to spare, and a
        canary analysis's queued calls too (eight at a time on a one-at-a-time model)."""
        return max(2000, math.ceil(20 * self.answer_ms))

    @property
    def per_token_objective_ms(self) -> int:
        return max(1000, math.ceil(20 * self.per_token_ms))

    def slowing_tokens(self) -> int:
        """Tokens of a generation that lasts three objectives, so every call queued behind
        it waits longer than the objective for its first token."""
        wanted = math.ceil(3 * self.objective_ms / max(self.per_token_ms, 0.1))
        return min(MAX_SLOWING_TOKENS, wanted)


async def _direct_stream(
    session: aiohttp.ClientSession,
    server: ModelServer,
    tokens: int,
    *,
    started: asyncio.Event | None = None,
) -> tuple[float, float, int]:
    """Stream a completion straight from the model server: (ms to its first text chunk, ms
    to its end, chunks with text). `started` is set at the first text chunk."""
    body = {
        "model": server.model,
        "prompt": COUNTING,
        "max_tokens": tokens,
        "temperature": 0,
        "stream": True,
        "logit_bias": END_OF_GENERATION,
    }
    began = time.perf_counter()
    first: float | None = None
    pieces = 0
    async with session.post(f"{server.endpoint}/completions", json=body) as answer:
        assert answer.status == 200, await answer.text()
        async for line in answer.content:
            if line.startswith(b"data:") and b'"text": "' in line and b'"text": ""' not in line:
                pieces += 1
                if first is None:
                    first = time.perf_counter()
                    if started is not None:
                        started.set()
    end = time.perf_counter()
    assert first is not None, "the model streamed no text"
    return (first - began) * 1000.0, (end - began) * 1000.0, pieces


async def _calibrate(server: ModelServer) -> Calibration:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        _, short_ms, _ = await _direct_stream(session, server, TOKENS)
        first_ms, long_ms, pieces = await _direct_stream(session, server, 64)
    per_token = (long_ms - first_ms) / max(pieces - 1, 1)
    return Calibration(answer_ms=short_ms, per_token_ms=per_token)


def _objectives(calibration: Calibration, *, ttft_ms: int | None = None) -> dict[str, Any]:
    first = calibration.objective_ms if ttft_ms is None else ttft_ms
    return {
        "timeToFirstToken": {"percentile": 90, "milliseconds": first},
        "timePerOutputToken": {
            "percentile": 90,
            "milliseconds": calibration.per_token_objective_ms,
        },
    }


@dataclass
class Held:
    """The module's run, promoted at revision 2 under objectives the model meets."""

    stack: Stack
    namespace: str
    api: Api
    obj: dict[str, Any]
    calibration: Calibration
    ref: str
    digest: str


def _revision_settled(revision: int) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        return settled(obj) and obj["status"].get("revision") == revision

    return check


def _manifest(ref: str, digest: str, **spec: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(workflowrun(NAME, ref, digest, **spec))
    return loaded


@pytest.fixture(scope="module")
def held(stack: Stack, model_server: ModelServer) -> Iterator[Held]:
    calibration = asyncio.run(_calibrate(model_server))
    namespace = create_namespace(
        stack.server.url, stack.server.pki_dir, f"s-{uuid.uuid4().hex[:10]}"
    )
    api = Api(stack.server.kubeconfig)
    try:
        backend = modelserving.backend_of(model_server)
        backend["metadata"]["namespace"] = namespace
        api.call(lambda c: c.apply_backend(backend, namespace=namespace, field_manager="test"))
        common: dict[str, Any] = {
            "backend": {"name": PIN.name},
            "cache": {"enabled": False},
            "slo": _objectives(calibration),
        }
        ref_1, digest_1 = stack.spec("slo-model-1", text=SPEC)
        first = _manifest(ref_1, digest_1, **common)
        api.call(lambda c: c.create_workflowrun(first, namespace=namespace))
        api.wait(namespace, NAME, _revision_settled(1), timeout=180, message="revision 1")

        ref_2, digest_2 = stack.spec("slo-model-2", text=SPEC + "\n# revision 2\n")
        canary = {"weight": 50, "analysis": ANALYSIS}
        second = _manifest(ref_2, digest_2, canary=canary, **common)
        api.call(lambda c: c.apply_workflowrun(second, namespace=namespace, field_manager="test"))
        obj = api.wait(namespace, NAME, _revision_settled(2), timeout=300, message="revision 2")
        yield Held(stack, namespace, api, obj, calibration, ref_2, digest_2)
    finally:
        api.close()


def test_a_canary_held_to_objectives_the_model_meets_is_promoted_naming_each_figure(
    held: Held,
) -> None:
    obj = held.obj
    ready = condition_of(obj, "Ready")
    assert ready is not None and ready["status"] == "True", ready
    assert obj["status"]["backend"] == PIN.name
    analyze = step_of(obj, "analyze")
    assert analyze is not None and analyze["state"] == "Succeeded", analyze
    message = analyze.get("message", "")
    objective = held.calibration.objective_ms
    # Streamed (the objectives need first tokens): each figure is measured and within.
    assert re.search(
        rf"timeToFirstToken p90 [\d.]+ ms <= objective {objective} ms at p90", message
    ), message
    assert re.search(r"timePerOutputToken mean [\d.]+ ms <= objective", message), message
    promote = step_of(obj, "promote")
    assert promote is not None and promote["state"] == "Succeeded", promote


@contextlib.asynccontextmanager
async def _plnt_session(client: PlntClient) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(ssl=transport.ssl_context(client.connection))
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=300)
    ) as session:
        yield session


async def _through_plnt(session: aiohttp.ClientSession, url: str) -> None:
    """One streamed completion through the run's OpenAI proxy, read to its end."""
    body = {"model": "continue", "prompt": COUNTING, "stream": True}
    async with session.post(url, json=body) as answer:
        assert answer.status == 200, await answer.text()
        text = await answer.text()
    assert "[DONE]" in text, text[-300:]


def _first_token_objective(obj: dict[str, Any], calls: int) -> dict[str, Any] | None:
    """`status.slo`'s timeToFirstToken entry once it judged at least `calls` calls."""
    judged = (obj.get("status") or {}).get("slo") or {}
    if judged.get("calls", 0) < calls:
        return None
    for objective in judged.get("objectives") or []:
        if objective.get("name") == "timeToFirstToken" and objective.get("met") is not None:
            return dict(objective)
    return None


async def _idle_calls(kubeconfig: Any, namespace: str, count: int) -> None:
    """`count` streamed calls through plnt, one at a time: an idle model for each."""
    async with PlntClient.from_kubeconfig(kubeconfig) as client, _plnt_session(client) as session:
        url = _proxy_url(client, namespace)
        for _ in range(count):
            await _through_plnt(session, url)


async def _slowed_calls(
    kubeconfig: Any, namespace: str, server: ModelServer, *, tokens: int, count: int
) -> None:
    """A long generation straight on the model, and once it streams, `count` streamed
    calls through plnt at once: each waits for it (and for the others) to finish."""
    started = asyncio.Event()
    async with (
        PlntClient.from_kubeconfig(kubeconfig) as client,
        _plnt_session(client) as session,
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as direct,
    ):
        url = _proxy_url(client, namespace)
        slowing = asyncio.create_task(_direct_stream(direct, server, tokens, started=started))
        try:
            await asyncio.wait_for(started.wait(), 60)
            await asyncio.gather(*(_through_plnt(session, url) for _ in range(count)))
        finally:
            await slowing


def _proxy_url(client: PlntClient, namespace: str) -> str:
    base = client.object_path("workflowruns", NAME, namespace=namespace, subresource="proxy")
    return f"{client.connection.server}{base}/v1/completions"


def test_live_attainment_is_met_on_an_idle_model_and_falls_when_the_model_is_slowed(
    held: Held, model_server: ModelServer
) -> None:
    api, namespace, kubeconfig = held.api, held.namespace, held.stack.server.kubeconfig
    asyncio.run(_idle_calls(kubeconfig, namespace, 4))
    obj = api.wait(
        namespace,
        NAME,
        lambda obj: _first_token_objective(obj, 4) is not None,
        timeout=60,
        message="status.slo of the idle calls",
    )
    idle = _first_token_objective(obj, 4)
    assert idle is not None and idle["met"] is True, obj["status"]["slo"]
    judged = obj["status"]["slo"]["calls"]

    slowed_calls = 6
    tokens = held.calibration.slowing_tokens()
    asyncio.run(
        _slowed_calls(kubeconfig, namespace, model_server, tokens=tokens, count=slowed_calls)
    )
    obj = api.wait(
        namespace,
        NAME,
        lambda obj: _first_token_objective(obj, judged + slowed_calls) is not None,
        timeout=60,
        message="status.slo of the slowed calls",
    )
    slowed = _first_token_objective(obj, judged + slowed_calls)
    assert slowed is not None, obj["status"]["slo"]
    assert slowed["met"] is False, slowed
    assert slowed["attainment"] < idle["attainment"], (idle, slowed)
    assert slowed["budgetRemaining"] < idle["budgetRemaining"], (idle, slowed)
    assert obj["status"]["slo"]["met"] is False


def test_the_same_canary_held_to_an_objective_it_cannot_meet_is_rolled_back_as_slo_missed(
    held: Held,
) -> None:
    stack, api, namespace = held.stack, held.api, held.namespace
    ref_3, digest_3 = stack.spec("slo-model-3", text=SPEC + "\n# revision 3\n")
    third = _manifest(
        ref_3,
        digest_3,
        backend={"name": PIN.name},
        cache={"enabled": False},
        slo=_objectives(held.calibration, ttft_ms=NEVER_MET_MS),
        canary={"weight": 50, "analysis": ANALYSIS},
    )
    api.call(lambda c: c.apply_workflowrun(third, namespace=namespace, field_manager="test"))

    def degraded(obj: dict[str, Any]) -> bool:
        found = condition_of(obj, "Degraded")
        return settled(obj) and found is not None and found["status"] == "True"

    obj = api.wait(namespace, NAME, degraded, timeout=300, message="Degraded True")
    condition = condition_of(obj, "Degraded")
    assert condition is not None and condition["reason"] == "SLOMissed", condition
    figures = r"timeToFirstToken p90 ([\d.]+) ms > objective 1\.0 ms at p90; stable ([\d.]+) ms"
    measured = re.search(figures, condition["message"])
    assert measured is not None, condition["message"]
    assert float(measured.group(1)) > NEVER_MET_MS and float(measured.group(2)) > NEVER_MET_MS
    ready = condition_of(obj, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "RolledBack")
    assert (obj["status"]["revision"], obj["status"]["digest"]) == (2, held.digest)

    def slo_event() -> dict[str, Any] | None:
        for event in api.events(namespace, NAME):
            if event.get("reason") == "SLOMissed":
                return event
        return None

    event = wait_for(slo_event, timeout=30, message="a SLOMissed Event")
    assert event["type"] == "Warning", event
    assert re.search(figures, event["message"]) is not None, event["message"]
