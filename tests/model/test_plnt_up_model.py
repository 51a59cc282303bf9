"""`plnt up --model gemma3-270m`: the model server as a supervised child of plnt, its
PlntBackend, and the one line a user gets without the `llm` extra; a server that takes its
settings from plnt alone (never from `PORT`, `HOST`, `MODEL` … in plnt's environment), dies
with a `plnt up` killed with SIGKILL, and keeps its port across restarts (a new one, named
by the PlntBackend, when another process holds it).

The server is the real one on the real weights. `plnt up` runs with `--no-sagas` here: the
model server and its PlntBackend do not depend on Temporal (a deploy on the model is the
business of the end-to-end tests). Every process is stopped by PID, also on failure:
`plnt up` by the `PlntServer` fixture (SIGTERM, then SIGKILL), and any model server still
listening on the backend's port afterwards by `kill_all`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from plnt.processes import leftovers, models, modelserver
from plnt.processes.ports import free_port
from tests.support.hostile import leaked, set_hostile
from tests.support.model import PIN
from tests.support.plnt_server import Kubectl, PlntServer, wait_for
from tests.support.processes import kill_all, live_processes

pytestmark = pytest.mark.e2e


def test_without_the_llm_extra_plnt_up_model_exits_1_at_once_with_one_line(
    tmp_path: Path,
) -> None:
    # The extra is made missing honestly: in this interpreter `import llama_cpp` fails
    # (a None entry in sys.modules is how Python marks a module that cannot be imported),
    # so plnt's own check finds it absent, as it would in an environment without it.
    state = tmp_path / "state"
    program = (
        "import sys\n"
        "sys.modules['llama_cpp'] = None\n"
        "from plnt.cli.main import main\n"
        f"sys.argv = ['plnt', 'up', '--state-dir', {str(state)!r}, '--port', '1',"
        f" '--model', {PIN.name!r}]\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert models.INSTALL_HINT in lines[0] and "llama_cpp" in lines[0]
    assert not (state / "etcd").exists() and not (state / "models").exists()
    assert not live_processes(str(state))


def test_an_unknown_model_is_refused_before_anything_starts(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = subprocess.run(
        [sys.executable, "-m", "plnt", "up", "--state-dir", str(state), "--model", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and PIN.name in result.stderr
    assert not (state / "etcd").exists()


def backend(kubectl: Kubectl) -> dict[str, Any]:
    found: dict[str, Any] = kubectl.json("get", "plntbackend", PIN.name, "-n", "default")
    return found


def served(endpoint: str) -> list[str] | None:
    """The models the server lists; None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{endpoint}/models", timeout=10) as answer:
            return [entry["id"] for entry in json.loads(answer.read())["data"]]
    except OSError:
        return None


def model_servers(port: int) -> set[int]:
    return live_processes(modelserver.PROGRAM, f"--port {port} ")


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def restarts(kubectl: Kubectl) -> float | None:
    metrics = kubectl.run("get", "--raw", "/metrics").stdout
    for line in metrics.splitlines():
        if line.startswith('plnt_child_restarts_total{child="model"}'):
            return float(line.split()[-1])
    return None


def test_plnt_up_serves_the_model_as_a_supervised_child_and_registers_its_backend(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    kubectl = Kubectl(kubeconfig=state / "kubeconfig", cache_dir=cache)
    port = 0
    try:
        with PlntServer(state, extra_args=("--model", PIN.name)) as server:
            assert any(f"Model {PIN.name} at http://127.0.0.1:" in line for line in server.output)
            assert any(
                f"Model {PIN.name} started: weights assembled" in line for line in server.output
            )
            found = backend(kubectl)
            spec = found["spec"]
            assert (spec["type"], spec["models"]) == ("openai", [PIN.name])
            assert spec["capacity"]["maxConcurrency"] == 1
            endpoint = spec["endpoint"]
            assert endpoint.startswith("http://127.0.0.1:") and endpoint.endswith("/v1")
            port = int(endpoint.removeprefix("http://127.0.0.1:").removesuffix("/v1"))
            assert served(endpoint) == [PIN.name]
            assert spec["metricsEndpoint"] == endpoint.removesuffix("/v1") + "/metrics"
            assert (state / "models" / f"{PIN.name}.log").stat().st_size > 0

            (first,) = model_servers(port)
            assert server.process is not None and parent_of(first) == server.process.pid
            os.kill(first, signal.SIGKILL)
            again = wait_for(
                lambda: {pid for pid in model_servers(port) if pid != first},
                timeout=60,
                message="the model server restarted on its port",
            )
            wait_for(lambda: served(endpoint) == [PIN.name], timeout=60, message="it serves")
            wait_for(lambda: restarts(kubectl) == 1.0, timeout=30, message="one restart counted")
            (second,) = again
            assert parent_of(second) == server.process.pid
        assert not model_servers(port)  # stopped with plnt

        # Started again on the same state: the same port, the backend as it was.
        with PlntServer(state, extra_args=("--model", PIN.name)):
            assert backend(kubectl)["spec"]["endpoint"] == endpoint
            assert served(endpoint) == [PIN.name]
        assert not model_servers(port)
    finally:
        if port:
            kill_all(model_servers(port))


def completion(endpoint: str) -> str:
    """A short completion straight from the server (which would demand a key it was given
    through `API_KEY`)."""
    body = {"model": PIN.name, "prompt": "1, 2, 3,", "max_tokens": 4, "temperature": 0}
    request = urllib.request.Request(
        f"{endpoint}/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return str(json.loads(answer.read())["choices"][0]["text"])


def recorded_model_server(state: Path) -> int:
    document = json.loads((state / "models" / f"{PIN.name}.pid").read_text())
    return int(document["process"]["pid"])


def test_the_model_server_ignores_hostile_variables_dies_with_plnt_and_keeps_its_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    kubectl = Kubectl(kubeconfig=state / "kubeconfig", cache_dir=cache)
    api_port = free_port()
    set_hostile(monkeypatch)
    monkeypatch.setenv("PORT", str(api_port))  # as `make up PORT=…` exports it: the API's
    started: set[int] = set()
    try:
        with PlntServer(state, port=api_port, extra_args=("--model", PIN.name)) as first:
            endpoint = backend(kubectl)["spec"]["endpoint"]
            port = int(endpoint.removeprefix("http://127.0.0.1:").removesuffix("/v1"))
            assert port != api_port
            assert served(endpoint) == [PIN.name] and completion(endpoint)
            pid = recorded_model_server(state)
            started.add(pid)
            assert leaked(pid) == set()
            assert first.process is not None
            first.process.kill()  # SIGKILL: the model server goes with plnt up all the same
            first.process.wait()
            wait_for(
                lambda: leftovers.identity_of(pid) is None,
                timeout=30,
                message="the model server to exit with plnt up",
            )

        # Started again: the same port, the backend unchanged, nothing left to stop.
        with PlntServer(state, extra_args=("--model", PIN.name)) as second:
            started.add(recorded_model_server(state))
            assert backend(kubectl)["spec"]["endpoint"] == endpoint
            assert served(endpoint) == [PIN.name]
            assert not [line for line in second.output if "left by an earlier run" in line]

        # Its port held by another process: a new one, and the backend names it.
        with socket.socket() as holder:
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
            holder.bind(("127.0.0.1", port))
            holder.listen()
            with PlntServer(state, extra_args=("--model", PIN.name)) as third:
                started.add(recorded_model_server(state))
                moved = backend(kubectl)["spec"]["endpoint"]
                assert moved != endpoint and served(moved) == [PIN.name]
                assert [line for line in third.output if f"port {port} (of the last" in line]
    finally:
        kill_all(started)
