"""Every workflow lives where the determinism contract looks: `plnt.sagas.<saga>.workflow`
(or the benchmark's `plnt.bench.workflows`); the invocation workflow, run outside the
sandbox, is replayed inside it here.

import-linter's contract "workflow code imports nothing that does I/O" names the workflow
side by package, so a workflow defined in a module under none of them would escape it:
`test_every_workflow_module_is_under_a_package_the_contract_names` fails then.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import pytest
from importlinter import cli
from temporalio import client as temporal_client
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

import plnt.bench
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


def workflow_modules() -> set[str]:
    """The modules of `plnt.sagas` and `plnt.bench` that define a Temporal workflow."""
    found: set[str] = set()
    for package in (plnt.sagas, plnt.bench):
        for info in pkgutil.walk_packages(package.__path__, prefix=package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if isinstance(value, type) and hasattr(value, "__temporal_workflow_definition"):
                    found.add(value.__module__)
    return found


def contract_sources() -> list[str]:
    root = Path(plnt.__file__).resolve().parent.parent
    config = tomllib.loads((root / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"] == "workflow code imports nothing that does I/O"
    ]
    sources: list[str] = contract["source_modules"]
    return sources


def test_every_workflow_module_is_under_a_package_the_contract_names() -> None:
    sources = contract_sources()
    modules = workflow_modules()
    assert {
        "plnt.sagas.deploying.workflow.controller",
        "plnt.sagas.invoking.workflow",
        "plnt.sagas.benching.workflow",
        "plnt.bench.workflows",
    } <= modules
    uncovered = {
        name
        for name in modules
        if not any(name == source or name.startswith(source + ".") for source in sources)
    }
    assert uncovered == set()


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
