"""The deploy worker SIGKILLed in each saga step in turn: every run still ends Ready.

One stack for the module: `plnt up` with its embedded Temporal and no in-process worker,
and `plnt worker` as a child process (`tests/support/stack.py WorkerProcess`, periodic
backend probes off so only a deploy's resolve probes). Six runs are each held inside a
different step, then the worker is killed once with SIGKILL (one kill keeps the module
to one recovery's time), a new worker is started and the holds are let go. Each run
must end Ready with exactly one serving revision and no orphan runner, and its step's
activity must have run again on the new worker (Temporal's attempt number, which the
timeline records, is at least 2), which proves the kill landed inside it. How each
step is held:

* pull: the spec is pulled from a real registry (docker-registry) through `Gate`, which
  holds the registry requests until released;
* resolve: the run names a PlntBackend whose endpoint is `Gate`, which holds the
  reachability probe (`GET …/models`);
* install: the canary's first runner is stopped (SIGSTOP) as soon as it exists, so it
  cannot become ready (`RunnerStopper`, watching before the run is applied). The worker
  executes its runners here (`PLNT_RUNNER_FORKSERVER=0`): a forked runner is ready within
  milliseconds of existing, an executed one spends its imports (half a second or more)
  first, which is the window the stop needs to land in every time;
* smoke: the workflow's `http` step calls `Gate`, which holds the smoke call;
* analyze: the same, letting the smoke call through and holding the analysis load;
* promote: a second generation promotes with `canary.drainSeconds`, a durable timer
  the worker is killed in.

Temporal notices a dead worker by a missed heartbeat (`plnt.sagas.worker.Liveness`
gives every activity one), so each recovery takes seconds, not an activity's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from plnt.workflowspec import sources
from tests.support.blocking_api import Api
from tests.support.plnt_server import Kubectl, PlntServer, wait_for
from tests.support.registry import Registry, running_registry
from tests.support.stack import (
    WorkerProcess,
    kill_strays,
    publish,
    runner_pids,
    runner_pids_by_revision,
)
from tests.support.statuses import condition_of, step_of

NAMESPACE = "default"
WORKER_ENV = {"PLNT_RUNNER_FORKSERVER": "0"}
"""Runners executed, not forked: see the install hold in the module docstring."""


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A killed worker's connection breaks mid-answer: expected, not worth a traceback."""


class Gate:
    """An HTTP server (threads) that holds chosen requests until the test releases them.

    * `GET /open` answers at once;
    * `GET /hold/KEY` lets `free[KEY]` requests through, then holds the rest until KEY
      is released;
    * `GET /models/KEY/models` (an OpenAI-compatible reachability probe) is held until
      KEY is released;
    * anything under `/v2/` is passed to `registry` (an OCI registry), held until
      `"registry"` is released.

    `arrived(KEY)` is set when a request is held under KEY.
    """

    def __init__(self) -> None:
        self.registry: str | None = None
        self.free: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        self._arrived: dict[str, threading.Event] = {}
        self._release: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        gate = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                gate._serve(self)

            def do_HEAD(self) -> None:
                gate._serve(self)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def arrived(self, key: str) -> threading.Event:
        with self._lock:
            return self._arrived.setdefault(key, threading.Event())

    def release(self, key: str) -> None:
        with self._lock:
            self._release.setdefault(key, threading.Event()).set()

    def close(self) -> None:
        with self._lock:
            for event in self._release.values():
                event.set()
        self._server.shutdown()
        self._server.server_close()

    def _hold(self, key: str, *, free: int = 0) -> None:
        with self._lock:
            seen = self._seen[key] = self._seen.get(key, 0) + 1
            release = self._release.setdefault(key, threading.Event())
        if seen <= free:
            return
        self.arrived(key).set()
        release.wait(timeout=120)

    def _serve(self, request: http.server.BaseHTTPRequestHandler) -> None:
        parts = request.path.strip("/").split("/")
        if parts[0] == "v2" and self.registry is not None:
            self._hold("registry")
            self._relay(request)
            return
        if parts[0] == "hold":
            self._hold(parts[1], free=self.free.get(parts[1], 0))
        elif parts[0] == "models":
            self._hold(parts[1])
        body = b'{"object": "list", "data": [], "opened": true}'
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)

    def _relay(self, request: http.server.BaseHTTPRequestHandler) -> None:
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("accept",)}
        upstream = urllib.request.Request(
            f"{self.registry}{request.path}", method=request.command, headers=headers
        )
        try:
            with urllib.request.urlopen(upstream, timeout=30) as answer:
                status, reply_headers, body = answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as error:
            status, reply_headers, body = error.code, error.headers, error.read()
        request.send_response(status)
        for name in ("Content-Type", "Docker-Content-Digest"):
            if reply_headers.get(name):
                request.send_header(name, reply_headers[name])
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)


class RunnerStopper:
    """A thread that stops (SIGSTOP) every runner of `state` whose command line has
    `needle` the moment it appears (`runner_pids`), until `done`. Started before the run
    is applied, so how long the test takes to reach the hold does not matter; `held()`
    says which pids it stopped."""

    def __init__(self, state: Path, needle: str) -> None:
        self._state = state
        self._needle = needle
        self._stopped: set[int] = set()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def held(self) -> set[int]:
        with self._lock:
            return set(self._stopped)

    def done(self) -> None:
        self._done.set()
        self._thread.join(timeout=10)

    def _watch(self) -> None:
        while not self._done.is_set():
            for pid in runner_pids(self._state, contains=self._needle) - self.held():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                with self._lock:
                    self._stopped.add(pid)
            self._done.wait(0.005)


def start_worker(temporal_address: str, kubeconfig: Path, state: Path) -> WorkerProcess:
    """The module's `plnt worker`: periodic probes off (only a deploy's resolve probes),
    runners executed (`WORKER_ENV`)."""
    return WorkerProcess(
        temporal_address,
        kubeconfig,
        state,
        extra_args=("--probe-interval", "0"),
        env=WORKER_ENV,
    ).start()


@dataclass
class Stack:
    state: Path
    server: PlntServer
    worker: WorkerProcess
    gate: Gate
    registry: Registry
    temporal_address: str
    killed_at: float = 0.0

    def restart_worker(self) -> None:
        self.worker.stop()
        self.worker = start_worker(self.temporal_address, self.server.kubeconfig, self.state)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    state = tmp_path_factory.mktemp("plnt-worker-kill")
    gate = Gate()
    server = PlntServer(state, sagas=True, extra_args=("--no-worker",))
    built: Stack | None = None
    try:
        with running_registry() as registry:
            gate.registry = f"http://{registry.host}"
            server.start()
            (line,) = [x for x in server.output if x.startswith("Temporal at ")]
            address = line.split()[2].rstrip(",")
            worker = start_worker(address, server.kubeconfig, state)
            built = Stack(state, server, worker, gate, registry, address)
            yield built
    finally:
        gate.close()
        if built is not None:
            built.worker.stop()
        server.stop()
        kill_strays(state)


@pytest.fixture
def api(stack: Stack) -> Iterator[Api]:
    facade = Api(stack.server.kubeconfig)
    try:
        yield facade
    finally:
        facade.close()


def workflow(name: str, url: str) -> str:
    """A spec (unique per run, so no cache has it) whose `http` step calls `url`."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: {name}, version: 1.0.0}}
inputs: {{type: object, properties: {{who: {{type: string}}}}, required: [who]}}
steps:
  - {{id: greet, kind: transform, template: "hello {{{{ inputs.who }}}}"}}
  - {{id: call, kind: http, needs: [greet], url: "{url}", retries: 0, timeoutSeconds: 60}}
output: '[steps.greet.output, steps.call.output]'
smoke:
  inputs: {{who: smoke}}
  expect: {{contains: hello smoke}}
"""


def run_manifest(name: str, ref: str, digest: str, **spec: Any) -> str:
    body = {"workflow": {"ref": ref, "digest": digest}, **spec}
    return yaml.safe_dump(
        {
            "apiVersion": "plnt.work/v1",
            "kind": "WorkflowRun",
            "metadata": {"name": name},
            "spec": body,
        }
    )


def ready_at_generation(obj: dict[str, Any]) -> bool:
    ready = condition_of(obj, "Ready")
    status = obj.get("status") or {}
    return (
        ready is not None
        and ready["status"] == "True"
        and status.get("phase") == "Ready"
        and status.get("observedGeneration") == obj["metadata"]["generation"]
    )


@dataclass
class Case:
    """One step's run: what the test applies, and how it knows the worker is inside."""

    stack: Stack
    api: Api
    kubectl: Kubectl
    name: str
    stopper: RunnerStopper | None = None

    def apply(self, manifest: str) -> None:
        self.kubectl.run("apply", "-n", NAMESPACE, "-f", "-", input=manifest)

    @property
    def uid(self) -> str:
        obj = self.api.wait(NAMESPACE, self.name, lambda obj: True, message="created")
        return str(obj["metadata"]["uid"])

    def layout_spec(self, url: str) -> tuple[str, str]:
        return publish(self.stack.state / "layout", self.name, workflow(self.name, url))

    def wait_arrived(self, key: str) -> None:
        if not self.stack.gate.arrived(key).wait(timeout=60):
            raise AssertionError(f"the saga never reached the held request {key!r}")


Release = Callable[[], None]


def begin_pull(case: Case) -> None:
    registry = case.stack.registry
    text = workflow(case.name, f"{case.stack.gate.url}/open")
    pinned = asyncio.run(sources.publish(text.encode(), registry.ref(case.name)))
    assert pinned.digest is not None
    via_gate = f"oci://{case.stack.gate.url.removeprefix('http://')}/{case.name}:v1"
    case.apply(run_manifest(case.name, via_gate, str(pinned.digest)))


def hold_pull(case: Case) -> Release:
    case.wait_arrived("registry")
    return lambda: case.stack.gate.release("registry")


def begin_resolve(case: Case) -> None:
    backend = {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": case.name},
        "spec": {"type": "openai", "endpoint": f"{case.stack.gate.url}/models/{case.name}"},
    }
    case.kubectl.run("apply", "-n", NAMESPACE, "-f", "-", input=yaml.safe_dump(backend))
    ref, digest = case.layout_spec(f"{case.stack.gate.url}/open")
    case.apply(run_manifest(case.name, ref, digest, backend={"name": case.name}))


def hold_resolve(case: Case) -> Release:
    case.wait_arrived(case.name)  # the probe gives up after 3 s: this hold is taken last
    return lambda: case.stack.gate.release(case.name)


def begin_install(case: Case) -> None:
    # The runner's spec lives in the run's directory, NAMESPACE/NAME-UID, under the state.
    case.stopper = RunnerStopper(case.stack.state, f"/{NAMESPACE}/{case.name}-")
    ref, digest = case.layout_spec(f"{case.stack.gate.url}/open")
    case.apply(run_manifest(case.name, ref, digest))


def hold_install(case: Case) -> Release:
    stopper = case.stopper
    assert stopper is not None
    try:
        wait_for(stopper.held, timeout=60, message="a runner")
    finally:
        stopper.done()
    held = stopper.held()  # with any found between the wait and `done`
    assert held == runner_pids(case.stack.state, contains=case.uid), "the run's runner"

    def release() -> None:
        for pid in held:
            os.kill(pid, signal.SIGCONT)

    return release


def begin_smoke(case: Case) -> None:
    ref, digest = case.layout_spec(f"{case.stack.gate.url}/hold/{case.name}")
    case.apply(run_manifest(case.name, ref, digest))


def hold_smoke(case: Case) -> Release:
    case.wait_arrived(case.name)
    return lambda: case.stack.gate.release(case.name)


def begin_analyze(case: Case) -> None:
    case.stack.gate.free[case.name] = 1  # the smoke call passes; the analysis load is held
    ref, digest = case.layout_spec(f"{case.stack.gate.url}/hold/{case.name}")
    case.apply(run_manifest(case.name, ref, digest, canary={"analysis": {"requests": 3}}))


def begin_promote(case: Case) -> None:
    ref, digest = case.layout_spec(f"{case.stack.gate.url}/open")
    case.apply(run_manifest(case.name, ref, digest))


def hold_promote(case: Case) -> Release:
    """Revision 1 deploys; revision 2 is held in promote by a 10 s drain timer."""
    case.api.wait(NAMESPACE, case.name, ready_at_generation, timeout=60, message="revision 1")
    text = workflow(case.name, f"{case.stack.gate.url}/open").replace("1.0.0", "2.0.0")
    ref, digest = publish(case.stack.state / "layout", f"{case.name}-2", text)
    second = run_manifest(case.name, ref, digest, canary={"drainSeconds": 10})
    case.kubectl.run("apply", "-n", NAMESPACE, "-f", "-", input=second)

    def promoting(obj: dict[str, Any]) -> bool:
        promote = step_of(obj, "promote")
        generation = obj["metadata"]["generation"]
        return generation == 2 and promote is not None and promote["state"] == "Running"

    case.api.wait(NAMESPACE, case.name, promoting, timeout=60, message="promote")
    return lambda: None


@dataclass(frozen=True)
class Hold:
    begin: Callable[[Case], None]
    """Applies the run (and what it needs)."""
    held: Callable[[Case], Release]
    """Returns once the worker is inside the step; the callable lets the step go on."""


HOLDS: dict[str, Hold] = {
    "pull": Hold(begin_pull, hold_pull),
    "resolve": Hold(begin_resolve, hold_resolve),
    "install": Hold(begin_install, hold_install),
    "smoke": Hold(begin_smoke, hold_smoke),
    "analyze": Hold(begin_analyze, hold_smoke),
    "promote": Hold(begin_promote, hold_promote),
}
ORDER = ("pull", "install", "smoke", "analyze", "promote", "resolve")
"""The order holds are taken in: the resolve probe's own 3 s timeout makes it last."""


@pytest.fixture(scope="module")
def killed(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    """Six runs, each held inside one step; then ONE kill of the worker, a new worker,
    and every hold let go. Returns the cases by step, for the verdicts below."""
    cache = tmp_path_factory.mktemp("kubectl") / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    kubectl = Kubectl(kubeconfig=stack.server.kubeconfig, cache_dir=cache)
    api = Api(stack.server.kubeconfig)
    cases = {step: Case(stack, api, kubectl, f"kill-{step}") for step in HOLDS}
    releases: list[Release] = []
    try:
        for step in ORDER[:-1]:  # every deploy starts at once; resolve's alone waits
            HOLDS[step].begin(cases[step])
        for step in ORDER[:-1]:
            releases.append(HOLDS[step].held(cases[step]))
        HOLDS["resolve"].begin(cases["resolve"])
        releases.append(HOLDS["resolve"].held(cases["resolve"]))
        stack.killed_at = time.monotonic()
        stack.worker.kill()
    finally:
        for release in releases:
            release()
        api.close()
    stack.restart_worker()
    return cases


@pytest.mark.parametrize("step", list(HOLDS))
def test_a_run_whose_worker_was_killed_in_this_step_ends_ready_with_one_revision(
    killed: dict[str, Case], api: Api, stack: Stack, step: str
) -> None:
    name = killed[step].name
    obj = api.wait(NAMESPACE, name, ready_at_generation, timeout=90, message=f"{name} Ready")
    print(f"\nworker killed in {step}: Ready {time.monotonic() - stack.killed_at:.2f} s after")
    revision = obj["metadata"]["generation"]  # one revision per generation here
    uid = obj["metadata"]["uid"]
    by_revision = runner_pids_by_revision(stack.state, uid=uid)
    assert set(by_revision) == {revision} and len(by_revision[revision]) == 1, by_revision
    assert runner_pids(stack.state, contains=uid) == by_revision[revision]  # no orphan
    assert obj["status"]["revision"] == revision
    assert [t["revision"] for t in obj["status"]["traffic"]] == [revision]
    record = step_of(obj, step)
    assert record is not None and record["state"] == "Succeeded", record
    if step != "promote":  # the step's activity ran again on the new worker
        assert record["attempts"] >= 2, record
    assert api.invoke(NAMESPACE, name, {"who": "after"}).revision == str(revision)
