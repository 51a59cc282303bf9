"""`kubectl plnt ...` through the real kubectl binary, which finds `kubectl-plnt` on PATH."""

from __future__ import annotations

from pathlib import Path

from plnt.client import PlntClient
from tests.support.cli import cli_env, run_process
from tests.support.plnt_server import kubectl_binary
from tests.support.token_server import workflowrun


async def test_kubectl_runs_the_plugin_for_help_and_for_list(
    client: PlntClient, admin_kubeconfig: Path, home: Path
) -> None:
    await client.create_workflowrun(workflowrun("via-kubectl"))
    env = cli_env(home, admin_kubeconfig)
    kubectl = kubectl_binary()
    helped = await run_process([kubectl, "plnt", "--help"], env=env)
    assert helped.code == 0, helped.stderr
    assert "Usage: kubectl plnt" in helped.stdout
    assert "invoke" in helped.stdout and "rollback" in helped.stdout
    listed = await run_process([kubectl, "plnt", "list"], env=env)
    assert listed.code == 0, listed.stderr
    assert listed.stdout.splitlines()[1].startswith("via-kubectl ")
    missing = await run_process([kubectl, "plnt", "get", "ghost"], env=env)
    assert missing.code == 3
    assert missing.stderr == 'error: workflowruns.plnt.work "ghost" not found\n'
