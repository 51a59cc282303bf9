"""An agent's Invocation whose worker is SIGKILLed mid-loop, at deploy level: a scripted
chat model behind a PlntBackend, its tool a held, counted HTTP target, a real API server,
Temporal, workers and runner.

The worker is killed right after a turn ended (the model asked for the tool, the call is
held) and right after the tool call answered (the next turn is held), each time once
Temporal holds that progress (the call's heartbeat details carry it). The resumed
Invocation must not ask the model again for the finished turn nor send the answered tool
call again — counted by the model and the tool themselves — and `status.attempts` must be
the calls the runner received.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio import client as temporal_client
from temporalio.converter import DataConverter

from plnt.sagas.invoking import workflow as inv
from tests.support.blocking_api import Api
from tests.support.durable_invocations import (
    get_invocation,
    invocation,
    only_endpoint,
    phase,
    received,
    step_key,
    wait_invocation,
    worker_lost,
)
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.scripted_model import ScriptedModel, lookup_agent, serving_scripted_model
from tests.support.stack import Stack
from tests.support.steptarget import StepTarget, serving_step_target


@pytest.fixture(scope="module")
def tool() -> Iterator[StepTarget]:
    with serving_step_target() as served:
        yield served


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with serving_scripted_model() as served:
        yield served


def loop_state(stack: Stack, api: Api, namespace: str, name: str) -> dict[str, Any]:
    """The agent step's tool-loop state in the call's last heartbeat details: what an
    attempt after a lost worker hands back to the runner (empty: none yet)."""
    uid = get_invocation(api, namespace, name)["metadata"]["uid"]
    workflow = inv.workflow_id(namespace, name, uid)

    async def read() -> dict[str, Any]:
        client = await temporal_client.Client.connect(stack.temporal.address)
        described = await client.get_workflow_handle(workflow).describe()
        for pending in described.raw_description.pending_activities:
            payloads = list(pending.heartbeat_details.payloads)
            if payloads:
                (details,) = DataConverter.default.payload_converter.from_payloads(payloads)
                partial = (details or {}).get("partial") or {}
                loops = (partial.get("agent") or {}).get("loops") or {}
                state: dict[str, Any] = loops.get("") or {}
                return state
        return {}

    return asyncio.run(read())


def turn_ended(state: dict[str, Any]) -> bool:
    """The model's first turn asked for the tool; its call has not answered."""
    pending = state.get("pending") or {}
    return len(pending.get("calls") or []) == 1 and not pending.get("results")


def tool_answered(state: dict[str, Any]) -> bool:
    """The first turn's tool call answered (its result is what the model sees next)."""
    pending = state.get("pending") or {}
    return bool(pending.get("results")) or len(state.get("turns") or []) == 1


@pytest.mark.parametrize("moment", ["turn-ended", "tool-answered"])
def test_a_worker_killed_mid_loop_resumes_without_asking_again_or_resending_calls(
    stack: Stack,
    kubectl: Kubectl,
    api: Api,
    namespace: str,
    tool: StepTarget,
    model: ScriptedModel,
    moment: str,
) -> None:
    name = f"a{uuid.uuid4().hex[:6]}"
    apply(kubectl, namespace, backend_manifest("scripted", "openai", endpoint=model.url))
    ref, digest = stack.spec(name, text=lookup_agent(tool.url, name=name))
    apply(kubectl, namespace, workflowrun(name, ref, digest, backend={"name": "scripted"}))
    kubectl.run("wait", "-n", namespace, "--for=condition=Ready", f"wfr/{name}", "--timeout=90s")
    endpoint = only_endpoint(api, namespace, name)
    before = received(endpoint)
    key = step_key()
    calls = f"/hold/{key}-tool"
    if moment == "turn-ended":
        tool.hold(f"{key}-tool")
    else:
        model.hold(key, 2)
    apply(kubectl, namespace, invocation("agent", name, {"key": key}))
    with worker_lost(stack):
        if moment == "turn-ended":
            wait_for(lambda: tool.arrivals(calls) == 1, timeout=60, message="the tool called")
            done = turn_ended
        else:
            wait_for(lambda: model.asked(key, 2) == 1, timeout=60, message="turn 2 asked")
            done = tool_answered
        wait_for(
            lambda: done(loop_state(stack, api, namespace, "agent")),
            timeout=30,
            message=f"Temporal holding the loop's progress ({moment})",
        )
    if moment == "turn-ended":
        # The call was in flight, not answered: an idempotent tool is called again.
        wait_for(lambda: tool.arrivals(calls) == 2, timeout=60, message="the tool again")
        tool.release(f"{key}-tool")
    else:
        wait_for(lambda: model.asked(key, 2) == 2, timeout=60, message="turn 2 asked again")
        model.release(key, 2)
    finished = wait_invocation(api, namespace, "agent", phase("Succeeded"), what="Succeeded")
    status = finished["status"]
    assert status["output"] == f"found: hold {key}-tool"
    assert model.asked(key, 1) == 1  # the finished turn was not asked again
    if moment == "turn-ended":
        assert (tool.arrivals(calls), model.asked(key, 2)) == (2, 1)
    else:
        assert (tool.arrivals(calls), model.asked(key, 2)) == (1, 2)  # not re-sent
    assert (status["attempts"], received(endpoint) - before) == (2, 2)
    (step,) = status["trace"]
    assert [turn["final"] for turn in step["turns"]] == [False, True]
    (lookup,) = step["turns"][0]["toolCalls"]
    if moment == "turn-ended":
        # The turn under way is carried on: its reply reused (resumed, no model time in
        # this attempt), its call made here.
        assert step["turns"][0]["modelMs"] == 0.0 and step["turns"][0].get("resumed") is True
        assert "resumed" not in lookup
    else:
        assert step["turns"][0].get("resumed") is True and lookup.get("resumed") is True
