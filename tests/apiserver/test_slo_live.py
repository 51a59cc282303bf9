"""Live traffic judged against spec.slo: streams through `proxy` and `invoke` are measured
(time to first token, time per output token, end to end), exported per run and revision,
and `status.slo` says what the window attained and what it cost.

The proxy_stack is `test_openai_proxy`'s: the API server in process, a real runner process of the
chat example, and the streaming OpenAI-compatible stand-in behind it, pacing its tokens.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from plnt.apiserver.workflowruns import slostatus
from tests.support.api_server import BACKENDS, BASE, Api, plntbackend
from tests.support.llm import LLM
from tests.support.proxied import ProxyStack, llm_runner, log_of
from tests.support.traffic import MERGE, run_with_traffic, target
from tests.support.waiting import eventually

PACE_SECONDS = 0.03


@pytest.fixture(autouse=True)
def quick_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slostatus, "INTERVAL_SECONDS", 0.1)


@pytest.fixture
async def paced(llm: LLM) -> AsyncIterator[LLM]:
    llm.pace = PACE_SECONDS
    yield llm


async def _objectives(api: Api, name: str, slo: dict[str, Any], backend: str) -> None:
    body = {"spec": {"slo": slo, "backend": {"name": backend}}}
    reply = await api.call("PATCH", f"{BASE}/{name}", body=body, headers=MERGE)
    assert reply.status == 200, reply.text


async def _priced_backend(api: Api) -> None:
    pricing = {"inputPerMillionTokens": 1.0, "outputPerMillionTokens": 2.0}
    body = plntbackend("priced", type="echo", pricing=pricing)
    assert (await api.call("POST", BACKENDS, body=body)).status == 201


def _sample(metrics: str, name: str, **labels: str) -> float | None:
    for line in metrics.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


async def test_streamed_calls_are_judged_in_status_slo_with_budget_and_cost(
    proxy_stack: ProxyStack, paced: LLM
) -> None:
    api = proxy_stack.api
    await _priced_backend(api)
    async with llm_runner(paced) as (_, runner):
        await run_with_traffic(api, "s", target(7, 100, runner))
        await _objectives(
            api,
            "s",
            {
                "timeToFirstToken": {"percentile": 50, "milliseconds": 10_000},
                "timePerOutputToken": {"percentile": 50, "milliseconds": 5},
                "maxErrorRate": 0.5,
            },
            "priced",
        )
        async with proxy_stack.client("s") as client:
            for turn in range(3):  # three questions: no step-cache hit
                question = [{"role": "user", "content": f"What is plnt, take {turn}?"}]
                stream = await client.chat.completions.create(
                    model="chat",
                    messages=question,  # type: ignore[arg-type]
                    stream=True,
                    stream_options={"include_usage": True},
                )
                _ = [chunk async for chunk in stream]

    entry = (await log_of(api, "s"))[-1]
    # Four tokens after the first, each paced: the mean is at least the pace.
    assert entry["timePerOutputTokenMs"] >= PACE_SECONDS * 1000 * 0.9, entry

    async def judged() -> dict[str, Any] | None:
        slo = (await api.call("GET", f"{BASE}/s")).json.get("status", {}).get("slo")
        return slo if slo and slo["calls"] >= 3 else None

    slo = await eventually(judged, within=20, what="status.slo over three calls")
    by_name = {o["name"]: o for o in slo["objectives"]}
    assert by_name["timeToFirstToken"]["met"] is True
    per_token = by_name["timePerOutputToken"]
    assert per_token["met"] is False and per_token["measured"] >= PACE_SECONDS * 1000 * 0.9
    assert per_token["budgetRemaining"] < 0  # every call missed it: the budget is overspent
    assert by_name["errorRate"] == {**by_name["errorRate"], "measured": 0.0, "met": True}
    assert slo["met"] is False and slo["errorBudgetRemaining"] == per_token["budgetRemaining"]
    cost = slo["cost"]
    assert cost["currency"] == "USD" and cost["basis"] == "tokens" and cost["outputTokens"] > 0
    expected = (cost["inputTokens"] * 1.0 + cost["outputTokens"] * 2.0) / 1e6
    assert abs(cost["amount"] - expected) < 1e-6

    metrics = (await api.call("GET", "/metrics")).text
    run = {"namespace": "default", "workflowrun": "s", "revision": "7"}
    assert _sample(metrics, "plnt_workflowrun_time_to_first_token_seconds_count", **run) == 3
    assert _sample(metrics, "plnt_workflowrun_request_duration_seconds_count", **run) == 3
    assert (_sample(metrics, "plnt_workflowrun_inter_token_seconds_count", **run) or 0) >= 9
    bad = _sample(
        metrics, "plnt_workflowrun_slo_calls_total", objective="timePerOutputToken", result="bad"
    )
    assert bad == 3
    assert _sample(
        metrics, "plnt_workflowrun_slo_objective", workflowrun="s", objective="timePerOutputToken"
    ) == pytest.approx(0.005)
    assert (
        _sample(
            metrics, "plnt_workflowrun_slo_error_budget_ratio", workflowrun="s", objective="latency"
        )
        is None
    )  # no latency objective, no series
    assert _sample(
        metrics, "plnt_workflowrun_slo_attainment_ratio", workflowrun="s", objective="errorRate"
    ) == pytest.approx(1.0)


async def test_a_run_without_calls_gets_objectives_neither_met_nor_missed(
    proxy_stack: ProxyStack,
) -> None:
    api = proxy_stack.api
    await run_with_traffic(api, "idle", target(1, 100, "http://127.0.0.1:9"))
    await _objectives(api, "idle", {"latency": {"milliseconds": 100}}, "none")

    async def judged() -> dict[str, Any] | None:
        status = (await api.call("GET", f"{BASE}/idle")).json.get("status", {})
        slo: dict[str, Any] | None = status.get("slo")
        return slo

    slo = await eventually(judged, within=20, what="status.slo of an idle run")
    assert slo["calls"] == 0 and "met" not in slo and "cost" not in slo
    assert slo["objectives"] == [{"name": "latency", "objective": 100.0, "percentile": 95.0,
                                  "samples": 0}]  # fmt: skip
