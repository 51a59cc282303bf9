"""The worker's periodic prober: PlntBackend status kept current without any deploy.

A second `plnt worker` probes every 0.2 s (on a task queue no saga uses, so it only
probes); a vLLM stand-in with a DCGM exporter beside it (tests/support/llm.py: no GPU
here) is registered, and its status follows what the stand-in reports. Each transition
of that status is one Event, which the real kubectl lists; probes that change nothing
record none, and a transition that happens again is counted into its Event. It is the
only periodic prober (the stack's saga worker runs with `--probe-interval 0`), and the
stand-in goes down between two of its probes (`LLM.go_down_between_probes`), so each
stop is the same transition with the same message, whatever the load.
"""

from __future__ import annotations

from yarl import URL

from plnt.processes.ports import free_port
from tests.support.backends import backend_events, status_of
from tests.support.llm import Gpu, threaded_llm
from tests.support.manifests import apply, backend_manifest
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.stack import Stack, WorkerProcess


def test_the_worker_probes_every_backend_periodically_without_any_deploy(
    stack: Stack, kubectl: Kubectl, namespace: str, probing_worker: WorkerProcess
) -> None:
    with threaded_llm(None, load=(5, 2)) as llm:
        llm.kv_cache = 0.3
        llm.gpus = [Gpu(20.0, 1000.0, 23000.0), Gpu(97.0, 1000.0, 23000.0)]
        manifest = backend_manifest(
            "gpu-a",
            "vllm",
            endpoint=llm.url,
            metricsEndpoint=f"{llm.root}/dcgm/metrics",
            capacity={"maxConcurrency": 16, "gpus": 2},
        )
        apply(kubectl, namespace, manifest)

        first = wait_for(
            lambda: (s := status_of(kubectl, namespace, "gpu-a")).get("inFlight") == 5 and s,
            timeout=20,
            interval=0.3,
            message="the first periodic probe",
        )
        assert first["reachable"] is True and first["queueDepth"] == 2
        assert first["gpuHeadroom"] == 1 and first["kvCacheUsage"] == 0.3
        assert isinstance(first["latencyMilliseconds"], int)
        [probed] = [c for c in first["conditions"] if c["type"] == "Probed"]
        assert (probed["status"], probed["reason"]) == ("True", "Fresh")

        # The load changes and no one deploys: the next rounds see it.
        llm.load = (1, 0)
        llm.kv_cache = 0.95
        later = wait_for(
            lambda: (s := status_of(kubectl, namespace, "gpu-a")).get("inFlight") == 1 and s,
            timeout=20,
            interval=0.3,
            message="a later periodic probe",
        )
        assert later["gpuHeadroom"] == 0  # the KV cache is full, whatever the GPUs say
        assert later["lastProbeTime"] >= first["lastProbeTime"]

        wide = kubectl.run("get", "-n", namespace, "plntbackends", "-o", "wide").stdout
        header, row = wide.splitlines()[:2]
        columns = header.split()
        assert columns[:8] == [
            "NAME", "TYPE", "ENDPOINT", "REACHABLE", "IN-FLIGHT", "QUEUE", "LATENCY", "GPU-HEADROOM"
        ]  # fmt: skip
        cells = row.split()
        assert cells[6].endswith("ms") and cells[6][:-2].isdigit()

    down = wait_for(
        lambda: (s := status_of(kubectl, namespace, "gpu-a")).get("reachable") is False and s,
        timeout=20,
        interval=0.3,
        message="the probe after the server stopped",
    )
    assert "inFlight" not in down and "gpuHeadroom" not in down  # unknown, not left over


def test_a_metrics_endpoint_that_is_not_an_http_url_is_refused_by_admission(
    kubectl: Kubectl, namespace: str
) -> None:
    manifest = backend_manifest(
        "bad", "vllm", endpoint="http://127.0.0.1:1/v1", metricsEndpoint="gpu-node:9400/metrics"
    )
    result = kubectl.run("apply", "-n", namespace, "-f", "-", input=manifest, check=False)
    assert result.returncode != 0
    assert "spec.metricsEndpoint" in result.stderr
    assert "must be an http or https URL with a host" in result.stderr


def probes_pass(kubectl: Kubectl, namespace: str, name: str, rounds: int) -> None:
    """Wait until `rounds` more probes have been written (lastProbeTime has seconds)."""
    seen = {status_of(kubectl, namespace, name).get("lastProbeTime")}
    wait_for(
        lambda: (
            seen.add(status_of(kubectl, namespace, name).get("lastProbeTime")) or len(seen) > rounds
        ),
        timeout=30,
        interval=0.3,
        message=f"{rounds} more probes",
    )


def test_each_transition_of_a_backend_is_one_event_and_a_repeat_counts_into_it(
    stack: Stack, kubectl: Kubectl, namespace: str, probing_worker: WorkerProcess
) -> None:
    def events_are(*expected: tuple[str, str, int]) -> list[tuple[str, str, int]]:
        found: list[tuple[str, str, int]] = []

        def listed() -> list[tuple[str, str, int]] | None:
            found[:] = backend_events(kubectl, namespace, "flaky")
            return found if found == list(expected) else None

        try:
            matched: list[tuple[str, str, int]] = wait_for(
                listed, timeout=30, interval=0.3, message=f"the Events {expected}"
            )
        except AssertionError as error:
            listing = kubectl.run("get", "events", "-n", namespace, "-o", "yaml").stdout
            raise AssertionError(f"{error}; found {found}:\n{listing}") from None
        return matched

    reachable = ("Normal", "BackendReachable", 1)
    with threaded_llm(None, load=(1, 0)) as llm:
        llm.kv_cache = 0.3
        port = URL(llm.url).port
        manifest = backend_manifest(
            "flaky", "vllm", endpoint=llm.url, capacity={"maxConcurrency": 4, "gpus": 1}
        )
        apply(kubectl, namespace, manifest)
        events_are(reachable)
        probes_pass(kubectl, namespace, "flaky", 3)  # ≈ 15 probes of an unchanged backend
        assert backend_events(kubectl, namespace, "flaky") == [reachable]

        llm.kv_cache = 0.95
        exhausted = ("Warning", "HeadroomExhausted", 1)
        events_are(reachable, exhausted)
        llm.kv_cache = 0.3
        available = ("Normal", "HeadroomAvailable", 1)
        events_are(reachable, exhausted, available)
        llm.go_down_between_probes()

    earlier = [reachable, exhausted, available]
    for times in (1, 2):  # stopped, then started again on the same port: twice
        down = ("Warning", "BackendUnreachable", times)
        events_are(*earlier, down, *([("Normal", "BackendReachable", 1)] if times > 1 else []))
        probes_pass(kubectl, namespace, "flaky", 2)  # probes of a backend still down
        assert backend_events(kubectl, namespace, "flaky")[3] == down
        with threaded_llm(None, load=(1, 0), port=port) as llm:
            llm.kv_cache = 0.3
            events_are(*earlier, down, ("Normal", "BackendReachable", times))
            probes_pass(kubectl, namespace, "flaky", 2)
            llm.go_down_between_probes()

    table = kubectl.run(
        "get", "events", "-n", namespace, "-o", "wide",
        "--field-selector", "involvedObject.kind=PlntBackend",
    ).stdout  # fmt: skip
    assert "plntbackend/flaky" in table and "plnt-prober" in table
    obj = kubectl.json("get", "-n", namespace, "plntbackend", "flaky")
    listed = kubectl.json(
        "get", "events", "-n", namespace, "--field-selector", "reason=BackendUnreachable"
    )
    [event] = listed["items"]
    assert event["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert event["involvedObject"]["apiVersion"] == "plnt.work/v1"
    assert event["message"].startswith(f"GET {URL(llm.url).with_path('/v1/models')}: ")
    assert event["lastTimestamp"] >= event["firstTimestamp"]
    described = kubectl.run("describe", "-n", namespace, "plntbackend", "flaky").stdout
    assert "BackendUnreachable" in described and "HeadroomExhausted" in described


def test_a_backend_is_probed_as_soon_as_it_is_created_or_its_spec_changes(
    stack: Stack, kubectl: Kubectl, namespace: str
) -> None:
    """A worker whose periodic round comes once an hour: only the watch can probe in time."""
    worker = WorkerProcess(
        stack.temporal.address,
        stack.server.kubeconfig,
        stack.state_dir,
        extra_args=("--task-queue", "plnt-probe-hourly", "--probe-interval", "3600"),
    ).start()
    try:
        with threaded_llm(None) as llm:
            llm.first_token_delay = 0.2
            # The first backend may still meet the worker's first round; the second cannot.
            apply(kubectl, namespace, backend_manifest("first", "openai", endpoint=llm.url))
            wait_for(
                lambda: status_of(kubectl, namespace, "first").get("reachable") is True,
                timeout=20,
                interval=0.2,
                message="the first backend probed",
            )
            manifest = backend_manifest("fresh", "openai", endpoint=llm.url, models=["m"])
            apply(kubectl, namespace, manifest)
            status = wait_for(
                lambda: (s := status_of(kubectl, namespace, "fresh")).get("reachable") and s,
                timeout=20,
                interval=0.2,
                message="the new backend probed on creation",
            )
            assert status["timeToFirstTokenMilliseconds"] >= 200  # the stand-in's delay
            assert ("Normal", "BackendReachable", 1) in backend_events(kubectl, namespace, "fresh")
            wide = kubectl.run("get", "-n", namespace, "plntbackend", "fresh", "-o", "wide")
            header, row = wide.stdout.splitlines()[:2]
            assert header.split()[-2] == "TTFT" and row.split()[-2].endswith("ms")  # then AGE

            # Its endpoint is changed to one where nothing listens: probed at once again.
            closed = f"http://127.0.0.1:{free_port()}/v1"
            apply(kubectl, namespace, backend_manifest("fresh", "openai", endpoint=closed))
            down = wait_for(
                lambda: (
                    (s := status_of(kubectl, namespace, "fresh")).get("reachable") is False and s
                ),
                timeout=20,
                interval=0.2,
                message="the changed backend probed on its new spec",
            )
            assert "timeToFirstTokenMilliseconds" not in down  # unknown, not left over
            assert ("Warning", "BackendUnreachable", 1) in backend_events(
                kubectl, namespace, "fresh"
            )
    finally:
        worker.stop()
