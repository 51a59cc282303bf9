"""The `plnt` verbs as a user runs them: a child process, HTTP to a real API server."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any, TypeVar

import yaml

from plnt.client import NotFound, PlntClient
from tests.support.cli import Cli, cli_env
from tests.support.token_server import (
    ADMIN_TOKEN,
    DIGEST,
    NOBODY_TOKEN,
    Server,
    ready_status,
    workflowrun,
    write_kubeconfig,
)
from tests.support.waiting import eventually

T = TypeVar("T")


def write_run(path: Path, name: str, **spec: Any) -> Path:
    path.write_text(yaml.safe_dump(workflowrun(name, **spec)))
    return path


async def test_run_creates_then_configures_and_list_and_get_show_it(
    cli: Cli, client: PlntClient, tmp_path: Path
) -> None:
    manifest = write_run(tmp_path / "run.yaml", "summarize")
    created = await cli("run", "-f", str(manifest))
    assert (created.code, created.stdout) == (0, "workflowrun.plnt.work/summarize created\n")
    unchanged = await cli("run", "-f", str(manifest))
    assert unchanged.stdout == "workflowrun.plnt.work/summarize unchanged\n"
    write_run(manifest, "summarize", replicas=2)
    configured = await cli("run", "-f", str(manifest))
    assert configured.stdout == "workflowrun.plnt.work/summarize configured\n"
    stored = await client.get_workflowrun("summarize")
    assert stored["spec"]["replicas"] == 2
    assert stored["metadata"]["managedFields"][0]["manager"] == "plnt"

    listed = await cli("list")
    header, row = listed.stdout.splitlines()
    assert header.split() == ["NAME", "WORKFLOW", "BACKEND", "REPLICAS", "PHASE", "REVISION", "AGE"]
    assert row.startswith("summarize ")
    as_json = json.loads((await cli("list", "-o", "json")).stdout)
    assert [i["metadata"]["name"] for i in as_json["items"]] == ["summarize"]
    as_yaml = yaml.safe_load((await cli("get", "summarize", "-o", "yaml")).stdout)
    assert as_yaml["spec"]["workflow"]["digest"] == DIGEST
    wide = (await cli("get", "summarize", "-o", "wide")).stdout
    assert "DIGEST" in wide.splitlines()[0]


async def test_an_empty_namespace_lists_nothing_and_says_so(cli: Cli, namespace: str) -> None:
    result = await cli("list")
    assert (result.code, result.stdout) == (0, "")
    assert result.stderr == f"No resources found in {namespace} namespace.\n"


async def test_status_history_and_timeline_show_what_the_saga_wrote(
    cli: Cli, client: PlntClient
) -> None:
    await client.create_workflowrun(workflowrun("svc"))
    status = ready_status("http://127.0.0.1:9", revision=2)
    status["status"]["observedGeneration"] = 1
    status["status"]["history"].insert(
        0, {"revision": 1, "digest": "sha256:" + "ab" * 32, "reason": "deploy"}
    )
    status["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "Promoted",
            "message": "revision 2 serves",
            "lastTransitionTime": "2020-01-01T00:00:05Z",
        }
    ]
    status["status"]["saga"] = [
        {
            "name": "pull",
            "state": "Succeeded",
            "attempts": 1,
            "startTime": "2020-01-01T00:00:00Z",
            "endTime": "2020-01-01T00:00:02Z",
            "message": "pulled 812 bytes",
        },
        {
            "name": "smoke",
            "state": "Succeeded",
            "attempts": 2,
            "startTime": "2020-01-01T00:00:02Z",
            "endTime": "2020-01-01T00:00:05Z",
            "message": "",
        },
    ]
    await client.patch_workflowrun_status("svc", status)

    shown = (await cli("status", "svc")).stdout
    assert "Phase:       Ready" in shown
    assert "Revision:    2 (sha256:cdcdcdcdcdcd) on backend echo" in shown
    assert "Promoted" in shown and "revision 2 serves" in shown
    assert "✓ pull" in shown and "pulled 812 bytes" in shown and "2s" in shown
    assert "Accepted" in shown  # the creation Event

    history = (await cli("history", "svc")).stdout.splitlines()
    assert history[0].split() == ["REVISION", "DIGEST", "BACKEND", "PROMOTED", "AT", "REASON"]
    assert history[1].split()[:2] == ["1", "sha256:" + "ab" * 32]
    assert history[2].split()[:3] == ["2*", DIGEST, "echo"]

    timeline = (await cli("timeline", "svc")).stdout.splitlines()
    assert [line.split()[2] for line in timeline[1:3]] == ["pull", "smoke"]
    assert "Succeeded, 2 attempts, 3s" in timeline[2]


async def test_scale_changes_the_desired_replicas(cli: Cli, client: PlntClient) -> None:
    await client.create_workflowrun(workflowrun("sc"))
    result = await cli("scale", "sc", "--replicas", "3")
    assert (result.code, result.stdout) == (0, "workflowrun.plnt.work/sc scaled\n")
    assert (await client.get_workflowrun("sc"))["spec"]["replicas"] == 3


async def test_run_wait_follows_the_saga_and_ends_when_the_generation_is_ready(
    cli: Cli, client: PlntClient, tmp_path: Path
) -> None:
    manifest = write_run(tmp_path / "run.yaml", "w")
    waiting = asyncio.create_task(cli("run", "-f", str(manifest), "--wait", "--timeout", "60"))

    async def created() -> bool:
        try:
            await client.get_workflowrun("w")
        except NotFound:
            return False
        return True

    await eventually(created, within=60.0, what="the run to be created")
    step = {"name": "pull", "state": "Running", "attempts": 1, "startTime": "2030-01-01T00:00:00Z"}
    await client.patch_workflowrun_status(
        "w", {"status": {"phase": "Pulling", "observedGeneration": 1, "saga": [step]}}
    )
    done = {**step, "state": "Succeeded", "endTime": "2030-01-01T00:00:01Z", "message": "ok"}
    final = ready_status("http://127.0.0.1:9")
    final["status"].update(observedGeneration=1, saga=[done])
    await client.patch_workflowrun_status("w", final)
    result = await waiting
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "workflowrun.plnt.work/w created"
    assert lines[1:5] == [
        "phase: Pulling",
        "  ●  pull  Running  attempt 1  0s+",
        "phase: Ready",
        "  ✓  pull  Succeeded  attempt 1  1s  ok",
    ]
    assert lines[-1] == "workflowrun.plnt.work/w ready: revision 1 (sha256:cdcdcdcdcdcd)"


async def test_run_wait_exits_1_with_the_degraded_message_when_the_deploy_fails(
    cli: Cli, client: PlntClient, tmp_path: Path
) -> None:
    await client.create_workflowrun(workflowrun("f"))
    await client.patch_workflowrun_status(
        "f",
        {
            "status": {
                "phase": "Failed",
                "observedGeneration": 2,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "SmokeTestFailed",
                        "message": "smoke output did not contain 'hello'",
                        "lastTransitionTime": "2030-01-01T00:00:00Z",
                    }
                ],
            }
        },
    )
    manifest = write_run(tmp_path / "run.yaml", "f", replicas=2)  # generation 2
    result = await cli("run", "-f", str(manifest), "--wait", "--timeout", "60")
    assert result.code == 1
    assert result.stdout.splitlines()[-1] == "workflowrun.plnt.work/f failed"
    assert result.stderr == "error: smoke output did not contain 'hello'\n"


async def test_invoke_prints_the_output_and_details_with_verbose(
    cli: Cli, client: PlntClient, runner_url: str, tmp_path: Path
) -> None:
    await client.create_workflowrun(workflowrun("chat"))
    await client.patch_workflowrun_status("chat", ready_status(runner_url))
    inputs = tmp_path / "in.json"
    inputs.write_text(json.dumps({"question": "from the file"}))
    result = await cli("invoke", "chat", "-f", str(inputs), "--input", "question=hello", "-v")
    assert result.code == 0, result.stderr
    assert "hello" in result.stdout
    assert "revision: 1" in result.stderr
    assert "timing: apiserver" in result.stderr


async def test_rollback_abort_and_bench_report_the_servers_answer(
    cli: Cli, client: PlntClient
) -> None:
    await client.create_workflowrun(workflowrun("rb"))
    status = ready_status("http://127.0.0.1:9", revision=2)
    status["status"]["history"].insert(
        0, {"revision": 1, "digest": "sha256:" + "ab" * 32, "ref": "oci://r.example/wf:0"}
    )
    await client.patch_workflowrun_status("rb", status)
    rolled = await cli("rollback", "rb", "--to-revision", "1")
    assert rolled.stdout == (
        "workflowrun.plnt.work/rb rolled back to revision 1 (sha256:abababababab)\n"
    )
    unknown = await cli("rollback", "rb", "--to-revision", "7")
    assert unknown.code == 6 and unknown.stderr.startswith("error: ")
    aborted = await cli("abort", "rb")
    assert aborted.code == 1
    assert aborted.stderr.startswith("error: this API server runs without sagas")
    missing = await cli("abort", "no-such-run")  # not found comes first, as in kube
    assert missing.code == 3 and "not found" in missing.stderr
    bench = await cli("bench", "rb", "--duration", "1")
    assert (bench.code, bench.stderr) == (
        1,
        "error: this API server runs without sagas: workflowrun rb cannot be benched\n",
    )


async def test_failures_exit_with_their_code_and_the_servers_message_without_traceback(
    cli: Cli, server: Server, home: Path, tmp_path: Path
) -> None:
    missing = await cli("get", "ghost")
    assert missing.code == 3
    assert missing.stderr == 'error: workflowruns.plnt.work "ghost" not found\n'
    invalid = write_run(tmp_path / "bad.yaml", "bad", replicas=-3)
    rejected = await cli("run", "-f", str(invalid))
    assert rejected.code == 6 and "spec.replicas" in rejected.stderr
    nobody = write_kubeconfig(tmp_path / "nobody", server, token=NOBODY_TOKEN)
    denied = await cli("list", env=cli_env(home, nobody))
    assert denied.code == 5 and 'User "nobody" cannot list' in denied.stderr
    wrong = write_kubeconfig(tmp_path / "wrong", server, token="wrong")
    assert (await cli("list", env=cli_env(home, wrong))).code == 5
    usage = await cli("scale", "x")
    assert usage.code == 2
    not_a_run = tmp_path / "cm.yaml"
    not_a_run.write_text("kind: ConfigMap\nmetadata: {name: x}\n")
    wrong_kind = await cli("run", "-f", str(not_a_run))
    assert wrong_kind.code == 2 and "is a ConfigMap, not a WorkflowRun" in wrong_kind.stderr
    for result in (missing, rejected, denied, usage, wrong_kind):
        assert "Traceback" not in result.stderr


async def test_a_rollback_to_the_pinned_revision_is_a_conflict_and_exits_4(
    cli: Cli, client: PlntClient
) -> None:
    await client.create_workflowrun(workflowrun("dup"))
    status = ready_status("http://127.0.0.1:9")
    await client.patch_workflowrun_status("dup", status)
    # Rolling back to the revision the spec already pins is a conflict.
    result = await cli("rollback", "dup", "--to-revision", "1")
    assert result.code == 4, result.stderr


async def test_kubeconfig_list_context_and_namespace_flags_choose_the_target(
    cli: Cli, client: PlntClient, server: Server, home: Path, tmp_path: Path, namespace: str
) -> None:
    await client.create_workflowrun(workflowrun("here"))
    other = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{namespace}-b"}}
    await client.request("POST", "/api/v1/namespaces", json=other)
    await client.create_workflowrun(workflowrun("there", namespace=f"{namespace}-b"))
    # The first file has no current-context; the second supplies it and a token user.
    first = write_kubeconfig(
        tmp_path / "a" / "config",
        server,
        inline=False,
        context="files",
        namespace=f"{namespace}-b",
        current=False,
    )
    second = write_kubeconfig(
        tmp_path / "b" / "config", server, token=ADMIN_TOKEN, context="token", namespace=namespace
    )
    env = cli_env(home, None, KUBECONFIG=f"{first}:{second}")
    by_current = await cli("list", "-o", "name", env=env)
    assert by_current.stdout == "workflowrun.plnt.work/here\n"
    by_context = await cli("list", "-o", "name", "--context", "files", env=env)
    assert by_context.stdout == "workflowrun.plnt.work/there\n"
    by_flag = await cli("list", "-o", "name", "-n", f"{namespace}-b", env=env)
    assert by_flag.stdout == "workflowrun.plnt.work/there\n"
    explicit = await cli(
        "get",
        "here",
        "-o",
        "name",
        "--kubeconfig",
        str(second),
        env=cli_env(home, tmp_path / "absent"),
    )
    assert explicit.stdout == "workflowrun.plnt.work/here\n"
    unknown = await cli("list", "--context", "nope", env=env)
    assert unknown.code == 1 and 'context "nope" does not exist' in unknown.stderr


async def test_status_timeline_and_history_of_a_missing_run_exit_3_with_the_servers_message(
    cli: Cli,
) -> None:
    for verb in ("status", "timeline", "history"):
        result = await cli(verb, "ghost")
        assert (result.code, result.stdout) == (3, ""), verb
        assert result.stderr == 'error: workflowruns.plnt.work "ghost" not found\n', verb


async def test_status_of_a_run_the_user_may_not_read_exits_5(
    cli: Cli, client: PlntClient, server: Server, home: Path, tmp_path: Path
) -> None:
    await client.create_workflowrun(workflowrun("secret"))
    nobody = write_kubeconfig(tmp_path / "nobody", server, token=NOBODY_TOKEN)
    for verb in ("status", "history"):
        denied = await cli(verb, "secret", env=cli_env(home, nobody))
        assert denied.code == 5, (verb, denied.stderr)
        assert 'User "nobody" cannot get' in denied.stderr


async def test_an_api_server_that_does_not_answer_exits_8_as_unavailable(
    cli: Cli, server: Server, home: Path, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = write_kubeconfig(tmp_path / "gone", server)
    document = yaml.safe_load(config.read_text())
    document["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    config.write_text(yaml.safe_dump(document))
    result = await cli("list", env=cli_env(home, config))
    assert result.code == 8, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
