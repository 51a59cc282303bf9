"""Every workflow lives where the determinism contract looks: `plnt.sagas.<saga>.workflow`;
the invocation workflow, run outside the sandbox, is replayed inside it here.

import-linter's contract "workflow code imports nothing that does I/O" names the workflow
side by that pattern, not by a list, so a workflow defined anywhere else would escape it.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import re
from pathlib import Path

import pytest
from importlinter import cli
from temporalio import client as temporal_client
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

import plnt.sagas
from plnt.sagas.invoking import workflow as inv

WORKFLOW_SIDE = re.compile(r"^plnt\.sagas\.[a-z_]+\.workflow(\.[a-z_]+)*$")


def saga_modules() -> list[str]:
    return [
        info.name
        for info in pkgutil.walk_packages(plnt.sagas.__path__, prefix="plnt.sagas.")
        if not info.name.endswith("__main__")
    ]


def test_every_workflow_is_defined_on_a_sagas_workflow_side() -> None:
    defined: dict[str, str] = {}
    for name in saga_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, type) and hasattr(value, "__temporal_workflow_definition"):
                defined[value.__qualname__] = value.__module__
    assert set(defined) >= {"WorkflowRunController", "BenchWorkflow", "InvocationWorkflow"}
    astray = {cls: module for cls, module in defined.items() if not WORKFLOW_SIDE.match(module)}
    assert astray == {}


def test_workflow_modules_are_the_ones_the_contract_covers() -> None:
    workflow_side = [name for name in saga_modules() if WORKFLOW_SIDE.match(name)]
    assert "plnt.sagas.invoking.workflow" in workflow_side
    assert "plnt.sagas.deploying.workflow.steps" in workflow_side
    assert "plnt.sagas.benching.workflow" in workflow_side


def test_the_import_contracts_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    # The contracts are in pyproject.toml; this is `make lint`'s check, run with the tests
    # so adding I/O to a workflow module fails `pytest` too.
    root = Path(plnt.__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    assert cli.lint_imports(config_filename=str(root / "pyproject.toml"), no_cache=True) == 0


KEPT = sorted((Path(__file__).parent / "histories").glob("invocation-*.json"))


@pytest.mark.parametrize("path", KEPT, ids=[path.stem for path in KEPT])
async def test_the_invocation_workflow_replays_inside_temporals_sandbox(path: Path) -> None:
    # The worker runs it unsandboxed (docs/sagas.md, "Determinism": the sandbox costs each
    # Invocation milliseconds on its critical path); the tests run it sandboxed, so a clock,
    # random number or file read on its path fails here instead of in a replay.
    text = await asyncio.to_thread(path.read_text)
    history = temporal_client.WorkflowHistory.from_json(path.stem, text)
    sandboxed = SandboxedWorkflowRunner()
    replayer = Replayer(
        workflows=[inv.InvocationWorkflow],
        workflow_runner=sandboxed,
        unsandboxed_workflow_runner=sandboxed,
    )
    await replayer.replay_workflow(history)
