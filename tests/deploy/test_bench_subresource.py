"""The `/bench` subresource and `plnt bench` end to end.

A real API server, Temporal dev server and worker (the deploy tests' module stack) and
real runner processes. One run is deployed once for the module and held with two
revisions serving (revision 1 stable, revision 2 a canary paused for an hour), so every
test can bench "stable", "canary" or both. Benches are short (1 to 3 s) at a low open-loop
rate: what is checked is the protocol (202, progress, results, status, Events, refusals,
durability), not the numbers, which are measured elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio import client as temporal_client
from temporalio.worker import Replayer

from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.sagas.benching.workflow import BenchWorkflow
from plnt.sagas.benching.workflow import workflow_id as bench_workflow_id
from tests.support.blocking_api import Api
from tests.support.cli import Result, cli_env
from tests.support.manifests import workflowrun
from tests.support.namespaces import create_namespace
from tests.support.plnt_server import kubectl_binary, wait_for
from tests.support.stack import Stack
from tests.support.statuses import settled

HOLD = 3600
"""Seconds the canary pauses: far longer than the module, so both revisions serve."""
NAME = "benched"


@dataclass
class Held:
    """The module's run: revision 1 stable, revision 2 a paused canary."""

    namespace: str
    api: Api

    @property
    def path(self) -> str:
        return f"/apis/plnt.work/v1/namespaces/{self.namespace}/workflowruns/{NAME}/bench"

    def post(self, spec: dict[str, Any], *, name: str = NAME) -> Any:
        path = self.path.replace(f"/workflowruns/{NAME}/", f"/workflowruns/{name}/")
        body = {"apiVersion": "plnt.work/v1", "kind": "Bench", "spec": spec}
        return self.api.call(lambda c: c.request("POST", path, json=body))

    def get(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.api.call(lambda c: c.request("GET", self.path)).json()
        return answer

    def finished(self, bench_id: str, *, timeout: float = 60.0) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            bench = self.get()
            phase = (bench.get("status") or {}).get("phase")
            ours = bench["metadata"]["name"] == bench_id
            return bench if ours and phase in ("Succeeded", "Failed") else None

        found: dict[str, Any] = wait_for(done, timeout=timeout, interval=0.2, message="bench done")
        return found

    def run(self) -> dict[str, Any]:
        return self.api.get(self.namespace, NAME)


def _two_revisions(obj: dict[str, Any]) -> bool:
    traffic = (obj.get("status") or {}).get("traffic") or []
    return len(traffic) == 2 and all(t.get("endpoints") for t in traffic)


@pytest.fixture(scope="module")
def held(stack: Stack) -> Iterator[Held]:
    namespace = create_namespace(
        stack.server.url, stack.server.pki_dir, f"b-{uuid.uuid4().hex[:10]}"
    )
    api = Api(stack.server.kubeconfig)
    try:
        ref_1, digest_1 = stack.spec("bench-1", version="9.0.0")
        first = _manifest(ref_1, digest_1)
        api.call(lambda c: c.create_workflowrun(first, namespace=namespace))
        api.wait_settled(namespace, NAME)
        ref_2, digest_2 = stack.spec("bench-2", version="9.1.0")
        second = _manifest(ref_2, digest_2, canary={"weight": 50, "pauseSeconds": HOLD})

        async def replace(client: PlntClient) -> Any:
            current = await client.get_workflowrun(NAME, namespace=namespace)
            second["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            path = client.object_path("workflowruns", NAME, namespace=namespace)
            return await client.request("PUT", path, json=second)

        api.call(replace)
        api.wait(namespace, NAME, _two_revisions, message="revision 2 beside 1")
        yield Held(namespace, api)
    finally:
        api.close()


def _manifest(ref: str, digest: str, **spec: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(workflowrun(NAME, ref, digest, **spec))
    return loaded


# -- the subresource --------------------------------------------------------------------


def test_a_bench_is_accepted_at_once_shows_progress_then_lands_in_status_with_an_event(
    held: Held,
) -> None:
    answer = held.post({"durationSeconds": 3, "rate": 40, "inputs": {"topic": "etcd"}})
    assert answer.status == 202
    started = answer.json()
    bench_id = started["metadata"]["name"]
    assert started["kind"] == "Bench" and bench_id.startswith("bench-")
    assert started["status"]["phase"] == "Pending"
    assert started["status"]["targets"] == [{"label": "stable", "revision": 1}]
    assert started["spec"]["rate"] == 40 and "concurrency" not in started["spec"]
    assert started["spec"]["cache"] == "bypass"  # the default: measure the model

    seen: list[dict[str, Any]] = []

    def measuring() -> dict[str, Any] | None:
        bench = held.get()
        seen[:] = [bench]
        progress = (bench.get("status") or {}).get("progress") or []
        return bench if progress and progress[0]["requests"] > 0 else None

    try:
        running = wait_for(measuring, timeout=30, interval=0.1, message="progress")
    except AssertionError as error:
        raise AssertionError(f"{error}; last: {seen}") from None
    assert running["metadata"]["name"] == bench_id
    assert running["status"]["phase"] == "Running"
    (progress,) = running["status"]["progress"]
    assert progress["label"] == "stable" and progress["p99Ms"] >= progress["p50Ms"] > 0

    with pytest.raises(client_errors.Conflict) as second:
        held.post({"durationSeconds": 1, "rate": 5})
    assert f"bench {bench_id} is running" in second.value.message

    done = held.finished(bench_id)
    status = done["status"]
    assert status["phase"] == "Succeeded", status
    (target,) = status["targets"]
    assert (target["revision"], target["path"], target["replicas"]) == (1, "runner", 1)
    assert target["url"].endswith("/invoke") and target["cache"] == "bypass"
    (result,) = status["results"]
    assert result["label"] == "stable" and result["requestedRate"] == 40
    assert result["requests"] > 0 and result["errorRate"] == 0
    # One input, sent again and again: not once did the cache answer it.
    assert result["cacheHitRate"] == 0 and result["cacheReason"] is None
    assert result["latency"]["p99Ms"] >= result["latency"]["p50Ms"] > 0

    run = held.run()
    last = run["status"]["lastBench"]
    assert last["id"] == bench_id and last["phase"] == "Succeeded"
    assert last["results"] == status["results"]
    assert last["spec"]["inputCount"] == 1 and "inputs" not in last["spec"]
    assert run["status"]["benchHistory"][-1] == last
    events = [e for e in held.api.events(held.namespace, NAME) if e["reason"] == "BenchCompleted"]
    assert any(bench_id in e["message"] and "req/s" in e["message"] for e in events), events
    (event,) = [e for e in events if bench_id in e["message"]]
    assert event["type"] == "Normal" and "stable (revision 1)" in event["message"]


def test_compare_measures_both_revisions_in_one_window(held: Held) -> None:
    spec = {"durationSeconds": 1, "rate": 20, "compare": ["stable", 2], "cache": "use"}
    bench_id = held.post(spec).json()["metadata"]["name"]
    status = held.finished(bench_id)["status"]
    assert status["phase"] == "Succeeded", status
    assert [(t["label"], t["revision"]) for t in status["targets"]] == [("stable", 1), ("2", 2)]
    assert [r["label"] for r in status["results"]] == ["stable", "2"]
    assert {t["url"] for t in status["targets"]} == {
        f"{t['endpoints'][0]}/invoke" for t in held.run()["status"]["traffic"]
    }
    assert {t["cache"] for t in status["targets"]} == {"use"}
    for result in status["results"]:
        assert result["requests"] > 0 and result["errorRate"] == 0
        assert result["durationSeconds"] == pytest.approx(1, abs=0.5)
        # The smoke input, sent again and again with the cache in use: nearly all hits.
        assert result["cacheHitRate"] > 0.5, result


def test_a_bench_survives_its_worker_being_killed_and_starts_its_measurement_again(
    held: Held, stack: Stack
) -> None:
    bench_id = held.post({"durationSeconds": 2, "rate": 20, "revision": "canary"}).json()[
        "metadata"
    ]["name"]

    def measuring() -> bool:
        return bool((held.get().get("status") or {}).get("progress"))

    wait_for(measuring, timeout=30, interval=0.1, message="the measurement under way")
    stack.worker.kill()

    def restarting() -> dict[str, Any] | None:
        status = held.get()["status"]
        return status if status.get("restarts") == 1 else None

    lost = wait_for(restarting, timeout=30, interval=0.2, message="the retry scheduled")
    assert lost["phase"] == "Running" and lost["attempt"] == 2
    stack.restart_worker()
    status = held.finished(bench_id, timeout=90)["status"]
    assert status["phase"] == "Succeeded", status
    assert status["restarts"] == 1
    assert "measurement started again 1 time after its worker was lost" in status["message"]
    (result,) = status["results"]
    assert result["label"] == "canary" and result["requests"] > 0
    assert held.run()["status"]["lastBench"]["restarts"] == 1
    run = held.run()["metadata"]
    history = asyncio.run(_history(stack, bench_workflow_id(held.namespace, NAME, run["uid"])))
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert attempts[0] == 2  # the first attempt's start is recorded only if it completes
    asyncio.run(Replayer(workflows=[BenchWorkflow]).replay_workflow(history))


async def _history(stack: Stack, workflow_id: str) -> temporal_client.WorkflowHistory:
    """The bench workflow's history, as Temporal keeps it, to replay against today's code."""
    client = await temporal_client.Client.connect(stack.temporal.address)
    return await client.get_workflow_handle(workflow_id).fetch_history()


BAD_SPECS = [
    ({"durationSeconds": 3601}, "spec.durationSeconds", "must be less than or equal to 3600"),
    ({"durationSeconds": 0}, "spec.durationSeconds", "must be greater than 0"),
    ({"rate": 0}, "spec.rate", "must be greater than 0"),
    ({"rate": -5}, "spec.rate", "must be greater than 0"),
    ({"concurrency": 1001}, "spec.concurrency", "must be less than or equal to 1000"),
    ({"rate": 10, "concurrency": 2}, "spec.concurrency", "may not be set together with spec.rate"),
    ({"revision": "newest"}, "spec.revision", 'Unsupported value: "newest"'),
    ({"revision": 7}, "spec.revision", "Not found: 7: it has no ready runners"),
    ({"compare": ["stable", 9]}, "spec.compare[1]", "Not found: 9"),
    ({"compare": ["stable"]}, "spec.compare", "must have at least 2 items"),
    ({"compare": [1, 1]}, "spec.compare[1]", "Duplicate value: 1"),
    ({"compare": ["stable", 1]}, "spec.compare[1]", "both name revision 1"),
    ({"timeoutSeconds": 301}, "spec.timeoutSeconds", "must be less than or equal to 300"),
    ({"inputs": "etcd"}, "spec.inputs", ""),
    ({"surprise": 1}, "spec.surprise", "unknown field"),
]


@pytest.mark.parametrize(("spec", "field", "words"), BAD_SPECS)
def test_limits_out_of_range_are_422_naming_the_field(
    held: Held, spec: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(client_errors.Invalid) as refused:
        held.post(spec)
    error = refused.value
    assert error.code == 422 and error.reason == "Invalid"
    assert error.message.startswith(f'Bench.plnt.work "{NAME}" is invalid: ')
    fields = {cause.field: cause.message for cause in error.causes}
    assert field in fields, fields
    assert words in fields[field]


def test_a_bench_of_a_run_without_a_ready_revision_is_409_naming_the_phase(
    held: Held, stack: Stack
) -> None:
    missing = "sha256:" + "0" * 64
    ref, _ = stack.spec("bench-1", version="9.0.0")
    body = _manifest(ref, missing)
    body["metadata"]["name"] = "unready"
    held.api.call(lambda c: c.create_workflowrun(body, namespace=held.namespace))
    failed = held.api.wait(
        held.namespace, "unready", lambda o: settled(o) and o["status"]["phase"] == "Failed"
    )
    assert not failed["status"].get("traffic")
    with pytest.raises(client_errors.Conflict) as refused:
        held.post({"durationSeconds": 1}, name="unready")
    assert refused.value.message == (
        'Operation cannot be fulfilled on workflowruns.plnt.work "unready": workflowrun'
        " unready has no ready revision to bench (phase Failed)"
    )
    with pytest.raises(client_errors.NotFound) as never:
        held.api.call(lambda c: c.request("GET", held.path.replace(NAME, "unready")))
    assert "has no bench" in never.value.message


def test_discovery_lists_the_bench_subresource_with_its_verbs(held: Held) -> None:
    listing = held.api.call(lambda c: c.request("GET", "/apis/plnt.work/v1")).json()
    (entry,) = [r for r in listing["resources"] if r["name"] == "workflowruns/bench"]
    assert (entry["kind"], sorted(entry["verbs"])) == ("Bench", ["create", "get"])


# -- plnt bench and kubectl plnt bench ---------------------------------------------------


def _cli(stack: Stack, home: Path, *args: str, kubectl: bool = False) -> Result:
    """`plnt ARGS` (or `kubectl plnt ARGS` through the real kubectl) with a private HOME."""
    env = cli_env(home, stack.server.kubeconfig, COLUMNS="200")
    command = [kubectl_binary(), "plnt"] if kubectl else [sys.executable, "-m", "plnt.cli"]
    done = subprocess.run(
        [*command, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    return Result(done.returncode, done.stdout, done.stderr)


def test_plnt_bench_json_prints_the_finished_bench(
    held: Held, stack: Stack, tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs.yaml"
    inputs.write_text("- topic: etcd\n- topic: raft\n")
    done = _cli(
        stack, tmp_path, "bench", NAME, "-n", held.namespace, "--duration", "1", "--rate", "20",
        "-f", str(inputs), "--json",
    )  # fmt: skip
    assert done.code == 0, done.stderr
    bench = json.loads(done.stdout)
    assert bench["status"]["phase"] == "Succeeded"
    assert bench["spec"]["inputCount"] == 2
    assert bench["status"]["results"][0]["requests"] > 0
    assert held.run()["status"]["lastBench"]["id"] == bench["metadata"]["name"]


def test_plnt_bench_wait_false_returns_the_id_at_once(
    held: Held, stack: Stack, tmp_path: Path
) -> None:
    done = _cli(
        stack, tmp_path, "bench", NAME, "-n", held.namespace, "--duration", "4", "--rate", "2",
        "--wait=false",
    )  # fmt: skip
    assert done.code == 0, done.stderr  # it returned with 4 s of bench still to go
    bench_id = done.stdout.strip()
    assert bench_id.startswith("bench-")
    assert held.get()["metadata"]["name"] == bench_id
    busy = _cli(stack, tmp_path, "bench", NAME, "-n", held.namespace, "--duration", "1")
    assert busy.code == 4 and f"bench {bench_id} is running" in busy.stderr
    assert held.finished(bench_id)["status"]["phase"] == "Succeeded"
    bad = _cli(stack, tmp_path, "bench", NAME, "-n", held.namespace, "--concurrency", "1001")
    assert bad.code == 6 and "spec.concurrency" in bad.stderr


def test_kubectl_plnt_bench_compares_two_revisions_in_a_table(
    held: Held, stack: Stack, tmp_path: Path
) -> None:
    done = _cli(
        stack, tmp_path, "bench", NAME, "-n", held.namespace, "--duration", "1", "--rate", "20",
        "--compare", "1,2", kubectl=True,
    )  # fmt: skip
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("bench bench-") and f"workflowrun.plnt.work/{NAME}" in lines[0]
    header = next(line for line in lines if "REVISION" in line)
    for column in ("REQUESTS", "P50", "P99", "ERRORS", "CACHE HITS", "GPU"):
        assert column in header
    rows = [line.split("│")[1].strip() for line in lines if line.startswith("│ revision")]
    assert rows == ["revision 1", "revision 2"], done.stdout
    assert any(line.startswith("measured revision 2: http://") for line in lines), done.stdout
