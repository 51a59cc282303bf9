"""`--workers` of `plnt up` and `plnt serve` reaches their settings: the flag, `PLNT_WORKERS`,
the default (the CPUs this process may use), and the refusal of a count below 1. The
servers are replaced by a recorder, as in test_limit_options; the workers at work are in
tests/deploy/test_workers.py and tests/cluster/test_serve_workers.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from plnt.cli import serve, up
from plnt.processes import cpus
from tests.cli.test_limit_options import SERVE

app = typer.Typer()
up.register(app)
serve.register(app)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counts: list[int] = []

    def record(settings: Any, *, on_ready: Any) -> None:
        counts.append(settings.api_processes)

    monkeypatch.setattr("plnt.standalone.serving.run", record)
    monkeypatch.setattr("plnt.cluster.serving.run", record)
    monkeypatch.setattr("plnt.cli.up.exit_now", lambda code: None)
    monkeypatch.setattr("plnt.cli.serve.exit_now", lambda code: None)
    monkeypatch.delenv("PLNT_WORKER_SLOT", raising=False)
    return counts


def test_the_flag_and_the_environment_set_the_count(recorded: list[int], tmp_path: Path) -> None:
    up_argv = ["up", "--state-dir", str(tmp_path)]
    for argv in ([*up_argv, "--workers", "3"], [*SERVE, "--workers", "3"]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
    for argv in (up_argv, SERVE):
        result = CliRunner().invoke(app, argv, env={"PLNT_WORKERS": "2"})
        assert result.exit_code == 0, result.output
    assert recorded == [3, 3, 2, 2]


def test_the_default_is_the_cpus_this_process_may_use_less_one_for_plnt_ups_neighbours(
    recorded: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for available, expected_up in ((4, 3), (2, 1), (1, 1)):
        monkeypatch.setattr(cpus, "available", lambda available=available: available)
        for argv in (["up", "--state-dir", str(tmp_path)], SERVE):
            result = CliRunner().invoke(app, argv, env={"PLNT_WORKERS": None})
            assert result.exit_code == 0, result.output
        assert recorded[-2:] == [expected_up, available], (available, recorded)


@pytest.mark.parametrize("count", ["0", "-2"])
def test_a_count_below_one_is_refused_naming_the_flag(
    recorded: list[int], tmp_path: Path, count: str
) -> None:
    for argv in (["up", "--state-dir", str(tmp_path)], SERVE):
        result = CliRunner().invoke(app, [*argv, "--workers", count])
        assert result.exit_code == 2
        assert "--workers" in result.output and "at least 1" in result.output, result.output
    assert recorded == []
