"""The README is a test: `make up` in a fresh copy, then the quickstart and the OpenAI snippet
of docs/openai.md, each run as it is written.

* The copy is the files `git ls-files` names, as they are in the work tree: what is
  committed plus the changes not yet committed, and nothing untracked (no `.venv`, no
  state, no caches). A `git clone` would miss the uncommitted changes, which are what a
  change to the README or the Makefile is checked with before it is committed.
* `make up STATE_DIR=... PORT=...` runs in the copy as a user runs it: it creates the
  copy's own `.venv`, installs plnt (no extras) and starts `plnt up` on a free port; the
  test waits for its ready line. HOME is a fresh directory, so kubectl's cache and every
  `~` land there; pip keeps the user's cache and configuration (a new HOME would hide
  both, and an index configured there), so after the first run the install is quick.
* The first `sh` block under "## Quickstart" runs in one `bash -x -euo pipefail` in the
  copy, with `STATE` the state directory. The docs/openai.md blocks (its first `sh` block,
  then its first `python` block with the test's Python, which has `openai`; plnt does not
  depend on it) are run in that same shell just before the quickstart's clean-up step,
  the point at which a run exists, so nothing is deployed twice. The snippet's printout
  goes to a file the test reads: the model list and the workflow's answer.
* Afterwards, pass or fail: SIGINT to `make up`'s process group (Ctrl-C), then
  `plnt down --state-dir STATE` of the copy, and no process of the copy or the state
  directory may be left. The copy is the module's (its `.venv` then serves both tests);
  the `.venv` is removed when the module ends (it is large); the rest of the copy stays in
  pytest's temporary directory for a look after a failure.
* `make up MODEL=gemma3-270m STATE_DIR=... PORT=...` runs as a user whose shell exports
  variables meant for something else (`PORT`, `HOST`, `MODEL`, `ETCD_DATA_DIR`): make
  exports its command line's variables into the recipe's environment too, so `plnt up`'s
  own environment holds `PORT` = the API server's port. Every child must still start where
  plnt says (the model server on its own port, etcd in the state directory), the model's
  PlntBackend must be reachable, and nothing may be left once `make up` is stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from plnt.processes import models
from plnt.processes.ports import free_port
from tests.support.plnt_server import REPO, Kubectl, wait_for
from tests.support.processes import kill_all, live_processes
from tests.support.stack import runner_pids

INSTALL_AND_START = 600.0  # a new venv: pip installs plnt and its dependencies
MODEL_READY = 120.0  # the PlntBackend's first probe (the worker probes at start, then every 30 s)
QUICKSTART = 600.0  # its `kubectl wait`s allow 120 s each
STOP = 60.0

# Settings of the environment pytest runs in that would steer `make` or the quickstart.
NOT_PASSED = {"VIRTUAL_ENV", "KUBECONFIG", "STATE", "STATE_DIR", "PORT", "VENV", "PYTHON"}
NOT_PASSED |= {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}


def fenced_block(markdown: str, language: str, *, after: str = "") -> str:
    """The first ```LANGUAGE block of `markdown` after the line `after` (from the top if "")."""
    lines = markdown.splitlines()
    start = lines.index(after) + 1 if after else 0
    for index in range(start, len(lines)):
        if lines[index].strip() == f"```{language}":
            end = lines.index("```", index + 1)
            return "\n".join(lines[index + 1 : end]) + "\n"
    raise AssertionError(f"no ```{language} block after {after or 'the top'!r}")


def fresh_copy(destination: Path) -> Path:
    """The tracked files of the repository as the work tree has them (see the docstring)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    for name in listed.decode().split("\0"):
        source = REPO / name
        if not name or not source.exists():  # deleted in the work tree: not in the next commit
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return destination


def user_environment(home: Path) -> dict[str, str]:
    """A user's shell: this environment without the test's venv, with HOME at `home`."""
    test_bin = str(Path(sys.prefix) / "bin")
    env = {key: value for key, value in os.environ.items() if key not in NOT_PASSED}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != test_bin)
    real_home = Path.home()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or real_home / ".cache")
    env.setdefault("PIP_CACHE_DIR", str(cache / "pip"))
    config = Path(os.environ.get("XDG_CONFIG_HOME") or real_home / ".config")
    for pip_conf in (config / "pip" / "pip.conf", real_home / ".pip" / "pip.conf"):
        if "PIP_CONFIG_FILE" not in env and pip_conf.is_file():
            env["PIP_CONFIG_FILE"] = str(pip_conf)
    env["HOME"] = str(home)
    return env


def process_group(pgid: int) -> set[int]:
    """Live (non-zombie) processes of the process group `pgid`."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            found.add(int(entry))
    return found


@dataclass
class MakeUp:
    """`make up` in the copy, in its own process group, its output collected line by line."""

    copy: Path
    state: Path
    port: int
    env: dict[str, str]
    model: str = ""
    """`MODEL=` on make's command line; empty: none."""
    process: subprocess.Popen[str] | None = None
    output: list[str] = field(default_factory=list)
    ready_line: str = ""
    seconds_to_ready: float = 0.0
    pump: threading.Thread | None = None

    def start(self) -> None:
        ready = threading.Event()
        began = time.monotonic()
        self.process = subprocess.Popen(
            [
                "make",
                "up",
                f"STATE_DIR={self.state}",
                f"PORT={self.port}",
                *([f"MODEL={self.model}"] if self.model else []),
            ],
            cwd=self.copy,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        stdout = self.process.stdout
        assert stdout is not None

        def pump() -> None:
            for line in stdout:
                self.output.append(line)
                if line.startswith("plnt is ready at "):
                    self.ready_line = line.strip()
                    ready.set()

        self.pump = threading.Thread(target=pump, daemon=True)
        self.pump.start()
        deadline = began + INSTALL_AND_START
        while not ready.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"make up did not print its ready line within {INSTALL_AND_START:.0f} s"
                    f" (exit code {self.process.poll()}):\n{self.transcript()}"
                )
        self.seconds_to_ready = time.monotonic() - began

    def transcript(self) -> str:
        return "".join(self.output)

    def stop(self) -> list[str]:
        """Ctrl-C, then `plnt down`; what went wrong, as sentences ([] when nothing did)."""
        problems: list[str] = []
        process = self.process
        if process is not None:
            group = process.pid
            signals = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
            for number, sig in enumerate(signals):
                try:
                    os.killpg(group, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=STOP)
                    break
                except subprocess.TimeoutExpired:
                    problems.append(f"make up did not exit within {STOP:.0f} s of {sig.name}")
                    if number == len(signals) - 1:
                        process.wait()
            if self.pump is not None:
                self.pump.join(timeout=STOP)
            if process.stdout is not None:
                process.stdout.close()
            leftover = process_group(group)
            if leftover:
                problems.append(f"processes of make up's group left: {sorted(leftover)}")
                kill_all(leftover)
        plnt = self.copy / ".venv" / "bin" / "plnt"
        if plnt.exists():
            down = subprocess.run(
                [str(plnt), "down", "--state-dir", str(self.state)],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if down.returncode != 0:
                problems.append(f"plnt down failed:\n{down.stdout}{down.stderr}")
        strays = live_processes(str(self.copy)) | live_processes(str(self.state))
        if strays:
            problems.append(f"processes of the copy or its state left: {sorted(strays)}")
            kill_all(strays)
        return problems


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The module's fresh copy; the `.venv` its first `make up` creates is removed at the end."""
    root = fresh_copy(tmp_path_factory.mktemp("readme") / "plnt")
    try:
        yield root
    finally:
        shutil.rmtree(root / ".venv", ignore_errors=True)


@contextlib.contextmanager
def made_up(stack: MakeUp) -> Iterator[MakeUp]:
    """`stack` started; stopped on exit, pass or fail, and nothing of it may be left."""
    try:
        stack.start()
        yield stack
    finally:
        problems = stack.stop()
        assert not problems, "\n".join(problems) + "\n" + stack.transcript()
        assert "Traceback" not in stack.transcript(), stack.transcript()


def home_of(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def make_up(copy: Path, tmp_path: Path) -> Iterator[MakeUp]:
    stack = MakeUp(copy, tmp_path / "state", free_port(), user_environment(home_of(tmp_path)))
    with made_up(stack):
        yield stack


def quickstart_with_the_openai_snippet(root: Path) -> str:
    """The quickstart block with docs/openai.md's blocks run just before its clean-up."""
    readme = (root / "README.md").read_text()
    quickstart = fenced_block(readme, "sh", after="## Quickstart")
    before, marker, cleanup = quickstart.partition("\n# Clean up")
    assert marker, "the quickstart has no '# Clean up' step to run the OpenAI snippet before"
    openai_doc = (root / "docs" / "openai.md").read_text()
    shell, snippet = fenced_block(openai_doc, "sh"), fenced_block(openai_doc, "python")
    assert "\nSNIPPET\n" not in snippet
    return (
        f"{before}\n{shell}"
        f'"$OPENAI_PYTHON" - > "$ANSWER" <<\'SNIPPET\'\n{snippet}SNIPPET\n'
        f"{marker.lstrip()}{cleanup}"
    )


@pytest.mark.timeout(INSTALL_AND_START + QUICKSTART + 4 * STOP + 120)
def test_make_up_then_the_readme_quickstart_and_the_openai_snippet_work_as_written(
    make_up: MakeUp, tmp_path: Path
) -> None:
    state, copy = make_up.state, make_up.copy
    assert make_up.ready_line == (
        f"plnt is ready at https://127.0.0.1:{make_up.port}; "
        f"export KUBECONFIG={state / 'kubeconfig'}"
    ), make_up.transcript()

    answer_file = tmp_path / "answer.txt"
    env = {
        **make_up.env,
        "STATE": str(state),
        "OPENAI_PYTHON": sys.executable,
        "ANSWER": str(answer_file),
    }
    script = quickstart_with_the_openai_snippet(copy)
    began = time.monotonic()
    shell = subprocess.Popen(
        ["bash", "-x", "-euo", "pipefail", "-c", script],
        cwd=copy,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        transcript, _ = shell.communicate(timeout=QUICKSTART)
    except subprocess.TimeoutExpired:
        os.killpg(shell.pid, signal.SIGKILL)
        transcript, _ = shell.communicate()
        raise AssertionError(f"the quickstart ran over {QUICKSTART:.0f} s:\n{transcript}") from None
    seconds = time.monotonic() - began
    answer = answer_file.read_text() if answer_file.exists() else "(none)"
    assert shell.returncode == 0, (
        f"the quickstart failed (exit code {shell.returncode}); the last '+ ' line is the"
        f" command that failed:\n{transcript}\nthe OpenAI snippet printed:\n{answer}"
    )
    print(f"\nmake up ready after {make_up.seconds_to_ready:.1f} s; quickstart {seconds:.1f} s")

    models, content = answer.splitlines()
    assert models == "['fanout']", answer
    output = json.loads(content)
    assert set(output) == {"topic", "pros", "cons"}, output
    assert output["topic"] and output["topic"] in output["pros"], output

    # The clean-up's teardown saga stopped every runner before the object went.
    assert runner_pids(state) == set(), transcript
    # Every command used $STATE: nothing went to the default state directory.
    assert not (Path(env["HOME"]) / ".local" / "state" / "plnt").exists(), transcript


HOSTILE_SHELL = {"PORT": "1", "HOST": "192.0.2.1", "MODEL": "hostile"}
"""What the user's shell exports for something else (ETCD_DATA_DIR is added per test)."""


def served_models(endpoint: str) -> list[str] | None:
    try:
        with urllib.request.urlopen(f"{endpoint}/models", timeout=10) as answer:
            return [entry["id"] for entry in json.loads(answer.read())["data"]]
    except OSError:
        return None


@pytest.mark.timeout(INSTALL_AND_START + MODEL_READY + 4 * STOP + 120)
def test_make_up_with_a_model_serves_it_where_plnt_says_whatever_the_shell_exports(
    copy: Path, tmp_path: Path
) -> None:
    home = home_of(tmp_path)
    hostile_etcd = tmp_path / "hostile-etcd"
    env = {**user_environment(home), **HOSTILE_SHELL, "ETCD_DATA_DIR": str(hostile_etcd)}
    model = models.GEMMA3_270M.name
    stack = MakeUp(copy, tmp_path / "state", free_port(), env, model=model)
    with made_up(stack):
        state = stack.state
        assert stack.ready_line.startswith(f"plnt is ready at https://127.0.0.1:{stack.port};")
        kubectl = Kubectl(kubeconfig=state / "kubeconfig", cache_dir=home / ".kube" / "cache")
        found = kubectl.json("get", "plntbackend", model, "-n", "default")
        endpoint = found["spec"]["endpoint"]
        assert endpoint.startswith("http://127.0.0.1:") and endpoint.endswith("/v1")
        assert f":{stack.port}/" not in endpoint, "the model server took plnt's PORT"
        assert served_models(endpoint) == [model]
        wait_for(
            lambda: (
                kubectl.json("get", "plntbackend", model, "-n", "default")
                .get("status", {})
                .get("reachable")
            ),
            timeout=MODEL_READY,
            interval=1.0,
            message=f"PlntBackend {model} reachable",
        )
        assert (state / "etcd" / "member").is_dir() and not hostile_etcd.exists()
        started = [line.strip() for line in stack.output if line.startswith(f"Model {model} ")]
        print(f"\nmake up MODEL={model} ready after {stack.seconds_to_ready:.1f} s:", *started)
