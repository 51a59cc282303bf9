"""`plnt invoke NAME --stream` as a child process against the in-process API server."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from plnt.client import PlntClient
from tests.support.cli import Cli, cli_env, run_process
from tests.support.plnt_server import kubectl_binary
from tests.support.runners import StartRunner
from tests.support.token_server import ready_status, workflowrun

STEP_LINE = re.compile(r"^✓ answer  \d+\.\d ms  cache (miss|hit)$")

FAILING = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: failing}}
steps:
  - {{id: greet, kind: transform, template: "hello"}}
  - {{id: call, kind: http, needs: [greet], url: "http://127.0.0.1:{port}/", retries: 0}}
output: steps.call.output
"""


async def test_stream_prints_each_finished_step_on_stderr_then_the_output(
    cli: Cli, client: PlntClient, runner_url: str
) -> None:
    await client.create_workflowrun(workflowrun("chat"))
    await client.patch_workflowrun_status("chat", ready_status(runner_url))
    result = await cli("invoke", "chat", "--stream", "--input", "question=hello")
    assert result.code == 0, result.stderr
    assert result.stdout == "hello\n"
    assert STEP_LINE.match(result.stderr.rstrip("\n")), result.stderr
    verbose = await cli("invoke", "chat", "--stream", "--input", "question=hello", "-v")
    assert verbose.code == 0, verbose.stderr
    lines = verbose.stderr.splitlines()
    assert lines[0].endswith("cache hit")
    assert "revision: 1" in lines and "cache: hit" in lines
    assert any(line.startswith("timing: runner ") for line in lines)
    assert verbose.stdout == "hello\n"


async def test_no_cache_runs_the_step_again_plain_or_streamed_and_says_bypass(
    cli: Cli, client: PlntClient, runner_url: str
) -> None:
    await client.create_workflowrun(workflowrun("chat"))
    await client.patch_workflowrun_status("chat", ready_status(runner_url))
    warmed = await cli("invoke", "chat", "--input", "question=again", "-v")
    assert warmed.code == 0, warmed.stderr
    for extra in ((), ("--stream",)):
        result = await cli(
            "invoke", "chat", *extra, "--input", "question=again", "-v", "--no-cache"
        )
        assert result.code == 0, result.stderr
        assert result.stdout == "again\n"
        lines = result.stderr.splitlines()
        assert "cache: bypass" in lines, result.stderr
        if extra:
            assert lines[0].endswith("cache bypass"), result.stderr
    cached = await cli("invoke", "chat", "--input", "question=again", "-v")
    assert "cache: hit" in cached.stderr.splitlines()


async def test_an_error_line_exits_1_with_the_runners_message_after_the_failed_step(
    cli: Cli,
    client: PlntClient,
    start_runner: StartRunner,
    write_spec: Callable[[str], Path],
    closed_port: int,
) -> None:
    runner = await start_runner(write_spec(FAILING.format(port=closed_port)))
    await client.create_workflowrun(workflowrun("failing"))
    await client.patch_workflowrun_status("failing", ready_status(runner))
    result = await cli("invoke", "failing", "--stream")
    assert result.code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("✓ greet  ")
    assert lines[1].startswith("✗ call  ") and "step 'call'" in lines[1]
    assert lines[2].startswith("error: step 'call': GET http://127.0.0.1:")
    assert len(lines) == 3


async def test_errors_before_the_stream_exit_as_they_do_without_stream(
    cli: Cli, client: PlntClient, runner_url: str
) -> None:
    await client.create_workflowrun(workflowrun("chat"))
    await client.patch_workflowrun_status("chat", ready_status(runner_url))
    plain = await cli("invoke", "chat", "--input", "nope=1")
    streamed = await cli("invoke", "chat", "--stream", "--input", "nope=1")
    assert (streamed.code, streamed.stderr) == (plain.code, plain.stderr)
    assert streamed.code != 0 and "question" in streamed.stderr
    missing = await cli("invoke", "ghost", "--stream")
    assert missing.code == 3
    assert missing.stderr == 'error: workflowruns.plnt.work "ghost" not found\n'


async def test_kubectl_create_raw_with_stream_prints_the_lines(
    client: PlntClient, runner_url: str, admin_kubeconfig: Path, home: Path, namespace: str
) -> None:
    await client.create_workflowrun(workflowrun("chat"))
    await client.patch_workflowrun_status("chat", ready_status(runner_url))
    inputs = home / "input.json"
    inputs.write_text(json.dumps({"inputs": {"question": "raw?"}}))
    path = f"/apis/plnt.work/v1/namespaces/{namespace}/workflowruns/chat/invoke?stream=true"
    result = await run_process(
        [kubectl_binary(), "create", "--raw", path, "-f", str(inputs)],
        env=cli_env(home, admin_kubeconfig),
    )
    assert result.code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    types = [line["type"] for line in lines]
    assert types[-2:] == ["step", "result"] and set(types[:-2]) == {"delta"}
    assert "".join(line["content"] for line in lines[:-2]) == "raw?"  # the reply as it came
    assert lines[-2]["step"]["id"] == "answer" and lines[-1]["output"] == "raw?"
