"""The serving-limit flags of `plnt up` and `plnt serve` reach the settings their servers
are built from: flags, `PLNT_*` environment variables, defaults, and refusals of
negative limits. The servers themselves are replaced by a recorder (and the commands'
final `os._exit` by a no-op), so only the wiring is under test here; the limits at work
are in tests/apiserver/test_inflight.py and tests/reliability/test_overload.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from plnt.apiserver.settings import ServingLimits
from plnt.cli import serve, up
from tests.support.cli import SERVE

app = typer.Typer()
up.register(app)
serve.register(app)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[ServingLimits]:
    limits: list[ServingLimits] = []

    def record(settings: Any, *, on_ready: Any) -> None:
        limits.append(settings.limits)

    monkeypatch.setattr("plnt.standalone.serving.run", record)
    monkeypatch.setattr("plnt.cluster.serving.run", record)
    monkeypatch.setattr("plnt.cli.up.exit_now", lambda code: None)
    monkeypatch.setattr("plnt.cli.serve.exit_now", lambda code: None)
    return limits


def test_both_commands_pass_the_flags_to_their_servers(
    recorded: list[ServingLimits], tmp_path: Path
) -> None:
    flags = [
        "--max-requests-inflight", "7",
        "--max-mutating-requests-inflight", "3",
        "--idle-connection-timeout", "12.5",
        "--invoke-timeout", "900",
    ]  # fmt: skip
    for argv in (["up", "--state-dir", str(tmp_path), *flags], [*SERVE, *flags]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
    expected = ServingLimits(
        max_requests_inflight=7,
        max_mutating_requests_inflight=3,
        idle_connection_timeout_seconds=12.5,
        invoke_timeout_seconds=900.0,
    )
    assert recorded == [expected, expected]


def test_environment_variables_set_the_limits_and_defaults_fill_the_rest(
    recorded: list[ServingLimits],
) -> None:
    env = {"PLNT_MAX_REQUESTS_INFLIGHT": "0", "PLNT_IDLE_CONNECTION_TIMEOUT": "30"}
    result = CliRunner().invoke(app, SERVE, env=env)
    assert result.exit_code == 0, result.output
    assert recorded == [
        ServingLimits(
            max_requests_inflight=0,
            max_mutating_requests_inflight=ServingLimits().max_mutating_requests_inflight,
            idle_connection_timeout_seconds=30.0,
        )
    ]


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-requests-inflight", "-1"],
        ["--max-mutating-requests-inflight", "-5"],
        ["--idle-connection-timeout", "0"],
        ["--invoke-timeout", "0"],
    ],
)
def test_negative_limits_and_a_zero_timeout_are_refused_naming_the_flag(
    recorded: list[ServingLimits], flags: list[str]
) -> None:
    result = CliRunner().invoke(app, [*SERVE, *flags])
    assert result.exit_code == 2
    assert flags[0] in result.output
    assert recorded == []
