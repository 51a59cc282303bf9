"""`python -m plnt.runner` as a real child process: it serves, and refuses a bad spec."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from typer.testing import CliRunner

from plnt.cli.main import app
from tests.support.examples import EXAMPLES
from tests.support.runners import runner_process

START_DEADLINE_SECONDS = 30.0


async def test_the_runner_module_serves_a_spec_as_a_child_process() -> None:
    async with (
        runner_process("--spec", str(EXAMPLES / "chat.workflow.yaml"), "--latency-ms", "1") as (
            _,
            url,
        ),
        aiohttp.ClientSession() as session,
    ):
        async with session.get(f"{url}/readyz") as response:
            assert response.status == 200
        async with session.post(f"{url}/invoke", json={"inputs": {"question": "q?"}}) as response:
            assert (await response.json())["output"] == "q?"


async def test_the_runner_stops_cleanly_on_sigterm() -> None:
    async with runner_process("--spec", str(EXAMPLES / "chat.workflow.yaml")) as (process, _):
        process.terminate()
        async with asyncio.timeout(START_DEADLINE_SECONDS):
            assert await process.wait() == 0


async def failed_start(*args: str) -> tuple[int | None, str]:
    """Run `python -m plnt.runner ARGS --port 0`, expected to exit at once: (code, stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "plnt.runner",
        *args,
        "--port",
        "0",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(START_DEADLINE_SECONDS):
            _, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.communicate()
    return process.returncode, stderr.decode()


@pytest.mark.parametrize("extra", [[], ["--backend-type", "openai"]])
async def test_the_runner_exits_2_naming_the_problem_when_the_setup_is_invalid(
    tmp_path: Path, extra: list[str]
) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text((EXAMPLES / "chat.workflow.yaml").read_text().replace("answer", "a-b"))
    if extra:
        spec = EXAMPLES / "chat.workflow.yaml"
    code, message = await failed_start("--spec", str(spec), *extra)
    assert code == 2
    assert ("steps[0](id=a-b).id" in message) if not extra else ("needs an endpoint" in message)


def test_plnt_runner_reports_an_invalid_spec_and_exits_2(tmp_path: Path) -> None:
    spec = tmp_path / "cyclic.yaml"
    spec.write_text(
        (EXAMPLES / "chat.workflow.yaml")
        .read_text()
        .replace("kind: model", "kind: model\n    needs: [answer]")
    )
    result = CliRunner().invoke(app, ["runner", "--spec", str(spec), "--port", "0"])
    assert result.exit_code == 2
    assert "cannot need itself" in result.output


async def test_the_runner_exits_2_naming_an_api_key_file_it_cannot_read(tmp_path: Path) -> None:
    missing = tmp_path / "secrets" / "llm" / "token"
    config = tmp_path / "backend.json"
    config.write_text(
        json.dumps(
            {
                "type": "openai",
                "endpoint": "http://127.0.0.1:1/v1",
                "model": "m",
                "apiKeyFile": str(missing),
            }
        )
    )
    code, message = await failed_start(
        "--spec", str(EXAMPLES / "chat.workflow.yaml"), "--backend-config", str(config)
    )
    assert code == 2
    assert f"apiKeyFile {missing}: No such file or directory" in message
