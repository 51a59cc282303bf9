"""Every `plnt` verb end to end: the CLI as a child process against a real deploy stack.

A real `plnt up` (etcd, API server), a real Temporal dev server, a real worker and
real runner processes (the `stack` fixture). Each test works in its own namespace
and runs `python -m plnt.cli VERB ... --kubeconfig KUBECONFIG -n NS` with a clean
environment, so what is asserted is what a user sees: exit code, stdout, stderr.
The `kubectl plnt` test goes through the real kubectl binary's plugin discovery.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.blocking_api import Api
from tests.support.cli import Result, cli_env
from tests.support.manifests import workflowrun
from tests.support.plnt_server import kubectl_binary
from tests.support.stack import Stack, runner_pids, runner_pids_by_revision
from tests.support.statuses import condition_of, settled, step_of

CLI_TIMEOUT = 120.0
# The analyze step sends this many invocations: a deploy slow enough to act on mid-way.
SLOW = {"analysis": {"requests": 3000, "maxErrorRate": 1.0}}
SAGA_STEPS = ("pull", "resolve", "install", "smoke", "route", "analyze", "evaluate", "promote")


@dataclass(frozen=True)
class Plnt:
    """`plnt VERB ARGS --kubeconfig K -n NS` as a child process, with a clean environment."""

    kubeconfig: Path
    namespace: str
    env: dict[str, str]

    def command(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "plnt.cli",
            *args,
            "--kubeconfig",
            str(self.kubeconfig),
            "-n",
            self.namespace,
        ]

    def __call__(self, *args: str, timeout: float = CLI_TIMEOUT) -> Result:
        # subprocess.run kills and reaps the child when the deadline passes.
        done = subprocess.run(
            self.command(*args), capture_output=True, text=True, env=self.env, timeout=timeout
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, *args: str) -> Result:
        """Run and insist on exit code 0."""
        result = self(*args)
        assert result.code == 0, (args, result)
        return result


@pytest.fixture
def plnt(stack: Stack, namespace: str, tmp_path: Path) -> Plnt:
    home = tmp_path / "home"
    home.mkdir()
    return Plnt(stack.server.kubeconfig, namespace, cli_env(home, None))


def manifest(path: Path, name: str, ref: str, digest: str, **spec: Any) -> Path:
    path.write_text(workflowrun(name, ref, digest, **spec))
    return path


def deploy(
    stack: Stack, plnt: Plnt, tmp_path: Path, name: str, tag: str, version: str, **spec: Any
) -> tuple[str, Result]:
    """Publish the example as `tag`, `plnt run -f --wait` it; (digest, the run's output)."""
    ref, digest = stack.spec(tag, version=version)
    path = manifest(tmp_path / f"{name}-{tag}.yaml", name, ref, digest, **spec)
    return digest, plnt.ok("run", "-f", str(path), "--wait")


def step_running(name: str) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        step = step_of(obj, name)
        return step is not None and step["state"] == "Running"

    return check


@contextmanager
def background(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A CLI run left going while the test acts; killed and reaped on the way out."""
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


# --- run --wait ------------------------------------------------------------------------------


def test_run_wait_follows_each_saga_step_and_exits_0_when_the_revision_is_promoted(
    stack: Stack, plnt: Plnt, api: Api, tmp_path: Path
) -> None:
    digest, result = deploy(stack, plnt, tmp_path, "good", "cli-good", "1.0.0")
    lines = result.stdout.splitlines()
    assert lines[0] == "workflowrun.plnt.work/good created"
    for step in ("pull", "resolve", "install", "smoke", "promote"):
        assert f"  ✓  {step}  Succeeded  attempt 1" in result.stdout, result.stdout
        assert f"  ●  {step}  Running" in result.stdout, result.stdout
    assert "phase: Ready" in lines
    assert lines[-1].startswith("workflowrun.plnt.work/good ready: revision 1 ")
    assert digest[:19] in lines[-1]
    assert "serves 1/1 replicas" in lines[-1]
    obj = api.get(plnt.namespace, "good")
    assert (obj["status"]["phase"], obj["status"]["digest"]) == ("Ready", digest)

    again = plnt.ok("run", "-f", str(tmp_path / "good-cli-good.yaml"), "--wait")
    assert again.stdout.splitlines()[0] == "workflowrun.plnt.work/good unchanged"
    assert again.stdout.splitlines()[-1].startswith("workflowrun.plnt.work/good ready: revision 1")


def test_run_wait_exits_1_naming_the_failed_expectation_when_the_smoke_of_revision_2_fails(
    stack: Stack, plnt: Plnt, api: Api, tmp_path: Path
) -> None:
    digest_1, _ = deploy(stack, plnt, tmp_path, "smoky", "cli-smoke-1", "1.0.0")
    ref_2, digest_2 = stack.spec("cli-smoke-2", version="2.0.0")
    smoke = {"input": {"topic": "etcd"}, "expect": {"equals": "nope"}}
    path = manifest(tmp_path / "smoky-2.yaml", "smoky", ref_2, digest_2, canary={"smoke": smoke})

    result = plnt("run", "-f", str(path), "--wait")

    assert result.code == 1, result
    assert "  ✗  smoke  Failed" in result.stdout, result.stdout
    assert result.stdout.splitlines()[-1] == "workflowrun.plnt.work/smoky failed"
    error = result.stderr.strip()
    assert error.startswith("error: ") and "\n" not in error, result.stderr
    assert "does not equal" in error and "nope" in error, error
    status = api.get(plnt.namespace, "smoky")["status"]
    assert (status["revision"], status["digest"]) == (1, digest_1)


def test_run_wait_exits_1_naming_both_digests_when_the_pinned_digest_does_not_match(
    stack: Stack, plnt: Plnt, tmp_path: Path
) -> None:
    ref, digest = stack.spec("cli-mismatch", version="9.9.8")
    wrong = "sha256:" + "1" * 64
    path = manifest(tmp_path / "bad.yaml", "bad", ref, wrong)

    result = plnt("run", "-f", str(path), "--wait")

    assert result.code == 1, result
    assert "  ✗  pull  Failed  attempt 1" in result.stdout, result.stdout
    assert result.stdout.splitlines()[-1] == "workflowrun.plnt.work/bad failed"
    assert wrong in result.stderr and digest in result.stderr, result.stderr


# --- reading a run ---------------------------------------------------------------------------


def test_list_get_status_timeline_and_history_show_the_saga_that_deployed_the_run(
    stack: Stack, plnt: Plnt, api: Api, tmp_path: Path
) -> None:
    digest, _ = deploy(stack, plnt, tmp_path, "shown", "cli-shown", "1.2.3")
    obj = api.get(plnt.namespace, "shown")

    header, *rows = plnt.ok("list").stdout.splitlines()
    assert header.split() == ["NAME", "WORKFLOW", "BACKEND", "REPLICAS", "PHASE", "REVISION", "AGE"]
    assert len(rows) == 1
    cells = rows[0].split()
    assert cells[0] == "shown" and "Ready" in cells and cells[cells.index("Ready") + 1] == "1"
    table = plnt.ok("get", "shown").stdout.splitlines()
    assert table[0] == header and table[1].split()[:-1] == cells[:-1]

    as_json = json.loads(plnt.ok("get", "shown", "-o", "json").stdout)
    as_yaml = yaml.safe_load(plnt.ok("get", "shown", "-o", "yaml").stdout)
    for shown in (as_json, as_yaml):
        assert shown["metadata"]["uid"] == obj["metadata"]["uid"]
        assert shown["spec"]["workflow"]["digest"] == digest
        assert (shown["status"]["revision"], shown["status"]["digest"]) == (1, digest)
        assert [s["name"] for s in shown["status"]["saga"]] == list(SAGA_STEPS)

    status = plnt.ok("status", "shown").stdout
    assert "Phase:       Ready (generation 1, observed 1)" in status, status
    assert f"Revision:    1 ({digest[:19]}" in status, status
    assert "Replicas:    1/1 ready" in status, status
    words = [line.split() for line in status.splitlines()]
    for step in ("pull", "resolve", "install", "smoke", "promote"):
        assert ["✓", step, "Succeeded", "1"] in [w[:4] for w in words], status
    assert ["Ready", "True", "Promoted"] in [w[:3] for w in words], status
    assert "Promoted" in status.split("Events:")[1], status

    timeline = plnt.ok("timeline", "shown").stdout.splitlines()
    assert timeline[0].split() == ["TIME", "KIND", "WHAT", "DETAIL"]
    kinds = [(line.split()[1], line.split()[2]) for line in timeline[1:]]
    assert [what for kind, what in kinds if kind == "step"] == list(SAGA_STEPS)
    assert ("event/Normal", "Promoted") in kinds, timeline
    stamps = [line.split()[0] for line in timeline[1:] if line.split()[0] != "-"]
    assert stamps == sorted(stamps)

    history = plnt.ok("history", "shown").stdout.splitlines()
    assert history[0].split() == ["REVISION", "DIGEST", "BACKEND", "PROMOTED", "AT", "REASON"]
    assert history[1].split()[:2] == ["1*", digest], history


# --- invoke ----------------------------------------------------------------------------------


def test_invoke_prints_the_output_and_verbose_shows_revision_cache_and_timings(
    stack: Stack, plnt: Plnt, tmp_path: Path
) -> None:
    deploy(stack, plnt, tmp_path, "asked", "cli-invoke", "1.0.0")

    first = plnt.ok("invoke", "asked", "--input", "topic=x", "-v")
    output = json.loads(first.stdout)
    assert output["topic"] == "x" and "x" in output["pros"] and "x" in output["cons"]
    details = first.stderr.splitlines()
    assert details[:2] == ["revision: 1", "cache: miss"], first.stderr
    assert any(line.startswith("timing: ") for line in details[2:]), first.stderr

    repeat = plnt.ok("invoke", "asked", "--input", "topic=x", "-v")
    assert json.loads(repeat.stdout) == output
    assert repeat.stderr.splitlines()[:2] == ["revision: 1", "cache: hit"], repeat.stderr

    quiet = plnt.ok("invoke", "asked", "--input", "topic=x")
    assert (json.loads(quiet.stdout), quiet.stderr) == (output, "")

    body = tmp_path / "input.json"
    body.write_text(json.dumps({"topic": "raft", "audience": "operators"}))
    from_file = json.loads(plnt.ok("invoke", "asked", "-f", str(body)).stdout)
    assert from_file["topic"] == "raft" and "operators" in from_file["cons"]


# --- operations ------------------------------------------------------------------------------


def test_scale_to_two_replicas_makes_two_ready_runner_processes(
    stack: Stack, plnt: Plnt, api: Api, tmp_path: Path
) -> None:
    digest, _ = deploy(stack, plnt, tmp_path, "wide", "cli-scale", "1.0.0")

    scaled = plnt.ok("scale", "wide", "--replicas", "2")
    assert scaled.stdout == "workflowrun.plnt.work/wide scaled\n"

    def two_ready(obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        return settled(obj) and status.get("readyReplicas") == 2

    obj = api.wait(plnt.namespace, "wide", two_ready, message="2 ready replicas")
    assert (obj["status"]["revision"], obj["status"]["digest"]) == (1, digest)
    by_revision = runner_pids_by_revision(stack.state_dir, uid=obj["metadata"]["uid"])
    assert set(by_revision) == {1} and len(by_revision[1]) == 2, by_revision
    assert runner_pids(stack.state_dir, contains=obj["metadata"]["uid"]) == by_revision[1]
    assert "Replicas:    2/2 ready" in plnt.ok("status", "wide").stdout


def test_rollback_to_revision_1_deploys_its_digest_again_as_revision_3(
    stack: Stack, plnt: Plnt, api: Api, tmp_path: Path
) -> None:
    digest_1, _ = deploy(stack, plnt, tmp_path, "back", "cli-roll-1", "1.0.0")
    digest_2, _ = deploy(stack, plnt, tmp_path, "back", "cli-roll-2", "2.0.0")
    assert digest_1 != digest_2

    rolled = plnt.ok("rollback", "back", "--to-revision", "1")
    assert rolled.stdout == (
        f"workflowrun.plnt.work/back rolled back to revision 1 ({digest_1[:19]})\n"
    )

    def revision_3(obj: dict[str, Any]) -> bool:
        return settled(obj) and obj["status"].get("revision") == 3

    obj = api.wait(plnt.namespace, "back", revision_3, message="revision 3 promoted")
    assert obj["status"]["digest"] == digest_1
    history = plnt.ok("history", "back").stdout.splitlines()
    assert [line.split()[:2] for line in history[1:]] == [
        ["1", digest_1],
        ["2", digest_2],
        ["3*", digest_1],
    ]
    assert history[-1].endswith("rollback to revision 1"), history


def test_abort_ends_a_slow_deploy_as_aborted_and_abort_with_nothing_in_flight_is_a_conflict(
    stack: Stack, plnt: Plnt, api: Api, tmp_path: Path
) -> None:
    digest_1, _ = deploy(stack, plnt, tmp_path, "halt", "cli-abort-1", "1.0.0")
    ref_2, digest_2 = stack.spec("cli-abort-2", version="2.0.0")
    path = manifest(tmp_path / "halt-2.yaml", "halt", ref_2, digest_2, canary=SLOW)

    with background(plnt.command("run", "-f", str(path), "--wait"), plnt.env) as waiting:
        api.wait(plnt.namespace, "halt", step_running("analyze"), message="analyze Running")
        aborted = plnt.ok("abort", "halt")
        assert aborted.stdout == "deploy of generation 2 aborted\n", aborted
        out, err = waiting.communicate(timeout=CLI_TIMEOUT)
    assert waiting.returncode == 1, (out, err)
    assert out.splitlines()[-1] == "workflowrun.plnt.work/halt failed", out
    assert "deploy of generation 2 aborted" in err, err

    obj = api.wait_settled(plnt.namespace, "halt")
    progressing = condition_of(obj, "Progressing")
    assert progressing is not None
    assert (progressing["status"], progressing["reason"]) == ("False", "Aborted")
    assert (obj["status"]["revision"], obj["status"]["digest"]) == (1, digest_1)

    again = plnt("abort", "halt")
    assert again.code == 4, again
    assert again.stdout == "", again
    assert again.stderr.startswith("error: Operation cannot be fulfilled on workflowruns"), again
    assert again.stderr.endswith('"halt": no deploy is in flight\n'), again


def test_get_and_bench_of_a_missing_run_exit_3_naming_it(
    plnt: Plnt,
) -> None:
    missing = plnt("get", "missing")
    assert (missing.code, missing.stdout) == (3, "")
    assert missing.stderr == 'error: workflowruns.plnt.work "missing" not found\n'
    bench = plnt("bench", "missing")
    assert (bench.code, bench.stderr) == (3, missing.stderr)


# --- kubectl plnt ----------------------------------------------------------------------------


def test_kubectl_plnt_invoke_and_status_run_the_plugin_found_on_path(
    stack: Stack, plnt: Plnt, tmp_path: Path
) -> None:
    digest, _ = deploy(stack, plnt, tmp_path, "plugged", "cli-plugin", "1.0.0")
    # kubectl hands the plugin its arguments, not its --kubeconfig: KUBECONFIG it is.
    home = tmp_path / "kubectl-home"
    home.mkdir()
    env = cli_env(home, stack.server.kubeconfig)
    kubectl = kubectl_binary()

    def kubectl_plnt(*args: str) -> Result:
        done = subprocess.run(
            [kubectl, "plnt", *args, "-n", plnt.namespace],
            capture_output=True,
            text=True,
            env=env,
            timeout=CLI_TIMEOUT,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    invoked = kubectl_plnt("invoke", "plugged", "--input", "topic=plugins", "-v")
    assert invoked.code == 0, invoked
    assert json.loads(invoked.stdout)["topic"] == "plugins"
    assert invoked.stderr.splitlines()[:2] == ["revision: 1", "cache: miss"], invoked.stderr

    status = kubectl_plnt("status", "plugged")
    assert status.code == 0, status
    assert f"Name:        plugged\nNamespace:   {plnt.namespace}\n" in status.stdout
    assert f"Revision:    1 ({digest[:19]}" in status.stdout, status.stdout


def test_promote_ends_a_canary_pause_at_once_and_with_no_pause_is_a_conflict(
    stack: Stack, plnt: Plnt, api: Api, tmp_path: Path
) -> None:
    deploy(stack, plnt, tmp_path, "hasty", "cli-promote-1", "1.0.0")
    ref_2, digest_2 = stack.spec("cli-promote-2", version="2.0.0")
    path = manifest(
        tmp_path / "hasty-2.yaml",
        "hasty",
        ref_2,
        digest_2,
        canary={"weight": 25, "pauseSeconds": 3600},
    )
    with background(plnt.command("run", "-f", str(path), "--wait"), plnt.env) as waiting:
        api.wait(plnt.namespace, "hasty", step_running("analyze"), message="analyze Running")
        promoted = plnt.ok("promote", "hasty")
        assert promoted.stdout == "canary of generation 2 promoted before its pause ended\n"
        out, err = waiting.communicate(timeout=CLI_TIMEOUT)
    assert waiting.returncode == 0, (out, err)
    assert out.splitlines()[-1].startswith("workflowrun.plnt.work/hasty ready"), out

    obj = api.get(plnt.namespace, "hasty")
    assert (obj["status"]["revision"], obj["status"]["digest"]) == (2, digest_2)
    analyze = step_of(obj, "analyze")
    assert analyze is not None and analyze["state"] == "Succeeded"
    assert analyze["message"].startswith("canary held 25% of invocations for ")
    assert analyze["message"].endswith(" s, then promoted on request")

    again = plnt("promote", "hasty")
    assert again.code == 4, again
    assert again.stderr.endswith('"hasty": no canary is pausing\n'), again


def test_retry_of_a_run_with_nothing_failed_is_a_conflict_naming_its_phase(
    stack: Stack, plnt: Plnt, tmp_path: Path
) -> None:
    deploy(stack, plnt, tmp_path, "steady", "cli-retry-1", "1.0.0")
    result = plnt("retry", "steady")
    assert result.code == 4, result
    assert result.stderr.endswith('"steady": no failed deploy waits for a retry (phase Ready)\n'), (
        result
    )
