"""The README's Quickstart, run verbatim against a real stack, so the documented path keeps working.

The first ```sh block after the "## Quickstart" heading is read from README.md at test
time (never copied here) and run by `bash -euo pipefail` with `STATE` set to this
module's own stack (so the `default` namespace the Quickstart uses is free), a
private HOME and the venv's bin directory first on PATH, from the repository root.
The stack stands in for `make up`: the example spec is published where `make up`
publishes it, and the Quickstart's own `kubectl` and `plnt` talk to it through
`$STATE/kubeconfig`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from plnt.workflowspec import digests
from tests.support.plnt_server import REPO
from tests.support.stack import Stack, publish, runner_pids

QUICKSTART_TIMEOUT = 300.0


def quickstart_block(readme: Path) -> str:
    """The body of the first ```sh block after the `## Quickstart` heading."""
    text = readme.read_text(encoding="utf-8")
    heading = re.search(r"^## Quickstart[ \t]*$", text, flags=re.MULTILINE)
    assert heading is not None, "README.md has no '## Quickstart' heading"
    block = re.compile(r"^```sh[ \t]*\n(.*?)^```[ \t]*$", flags=re.MULTILINE | re.DOTALL)
    found = block.search(text, heading.end())
    assert found is not None, "no ```sh block after '## Quickstart' in README.md"
    return found.group(1)


def run_script(script: str, *, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`bash -euo pipefail -c SCRIPT` in its own process group, killed whole past the deadline."""
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=QUICKSTART_TIMEOUT)
    finally:
        if proc.poll() is None:
            # The script's children (a `kubectl wait`, a CLI) share its process group.
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_readme_quickstart_runs_verbatim_and_leaves_no_runner_behind(
    stack: Stack, tmp_path: Path
) -> None:
    script = quickstart_block(REPO / "README.md")
    examples = REPO / "examples"
    # What `make up` does before it starts the server: publish the example spec.
    spec = examples / "fanout.workflow.yaml"
    run = yaml.safe_load((examples / "fanout-run.yaml").read_text())
    assert run["spec"]["workflow"]["digest"] == digests.compute(spec.read_bytes())
    publish(stack.state_dir / "layouts" / "examples", "fanout", spec.read_text())

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "COLUMNS")}
    venv_bin = Path(sys.executable).parent
    env.update(
        STATE=str(stack.state_dir),
        HOME=str(home),
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
    )

    done = run_script(script, env=env, cwd=REPO)

    transcript = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, transcript
    lines = done.stdout.splitlines()
    # `kubectl create --raw` prints the body as sent, without a final newline.
    decoder = json.JSONDecoder()
    raw_answers = [decoder.raw_decode(line)[0] for line in lines if line.startswith('{"')]
    topics = [(answer.get("output") or {}).get("topic") for answer in raw_answers]
    assert "etcd" in topics, transcript
    assert '"topic": "raft"' in done.stdout, transcript
    assert "revision: 1" in done.stderr.splitlines(), transcript
    history = [line for line in lines if re.match(r"\d+\*?\s+sha256:", line)]
    assert [row.split()[0] for row in history] == ["1", "2", "3*"], transcript
    assert history[2].endswith("rollback to revision 1"), transcript
    digest_1, digest_2, digest_3 = (row.split()[1] for row in history)
    assert digest_3 == digest_1 != digest_2, transcript
    assert 'workflowrun.plnt.work "fanout" deleted' in done.stdout, transcript
    assert runner_pids(stack.state_dir) == set()
