"""Determinism guard: the deploy saga's histories replay against the current workflow code.

Temporal resumes a workflow by replaying its history through the code, so a change
that alters the commands the workflow issues (activities, their order, timers, local
activities) breaks every saga in flight. Two sources of histories are replayed:

* `histories/*.json`, recorded by `record_histories.py` (run it after an intentional
  workflow change): they guard against accidental changes of the command sequence;
  `histories/before-typed-inputs/*.json`, recorded by the saga before its activities
  took typed inputs, prove that sagas begun then still finish (`workflow.patched`).
* the same scenarios run live in this module on a real stack (Temporal, `plnt up`, a
  separate worker), their histories fetched and replayed, so a recorded file is never
  the only evidence that replay works.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio import client as temporal_client
from temporalio.worker import Replayer

from plnt.sagas.deploying.workflow.controller import WorkflowRunController
from tests.deploy import record_histories as recording
from tests.support.stack import Stack

CURRENT = sorted(recording.HISTORIES.glob("*.json"))
RECORDED = CURRENT + sorted(recording.BEFORE_TYPED_INPUTS.glob("*.json"))


async def replay(history: temporal_client.WorkflowHistory) -> None:
    await Replayer(workflows=[WorkflowRunController]).replay_workflow(history)


@pytest.fixture(scope="module")
def specs(stack: Stack) -> recording.Specs:
    return recording.Specs.publish_into(stack.layout)


def test_every_scenario_has_a_recorded_history() -> None:
    assert [path.stem for path in CURRENT] == sorted(recording.SCENARIOS)
    before = sorted(path.stem for path in recording.BEFORE_TYPED_INPUTS.glob("*.json"))
    assert before == sorted(set(recording.SCENARIOS) - recording.SINCE_TYPED_INPUTS)


@pytest.mark.parametrize(
    "path", RECORDED, ids=[str(path.relative_to(recording.HISTORIES)) for path in RECORDED]
)
async def test_recorded_history_replays_without_nondeterminism(path: Path) -> None:
    text = await asyncio.to_thread(path.read_text)
    history = temporal_client.WorkflowHistory.from_json(path.stem, text)
    assert history.events, path
    await replay(history)


@pytest.mark.parametrize("scenario", sorted(recording.SCENARIOS))
async def test_history_of_a_live_saga_replays_without_nondeterminism(
    stack: Stack, specs: recording.Specs, scenario: str
) -> None:
    history = await recording.run_scenario(
        scenario,
        kubeconfig=stack.server.kubeconfig,
        temporal_address=stack.temporal.address,
        specs=specs,
    )
    completed = [
        e for e in history.events if e.HasField("workflow_execution_completed_event_attributes")
    ]
    assert completed, f"the {scenario} saga did not finish"
    await replay(history)
