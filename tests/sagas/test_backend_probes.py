"""Probing backends: what vLLM, ollama and a DCGM exporter report becomes a status.

The servers are the stand-in of tests/support/llm.py (no GPU here); the prober's
resilience is tested against a small recording API, since what matters there is what it
writes and that it keeps going, not the API server (tests/deploy covers that end).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest

from plnt.api.meta import parse_time
from plnt.client.events import EventPoster
from plnt.sagas.probing import backend_probes, placement
from tests.support.llm import Gpu, serving_llm


def backend(endpoint: str, backend_type: str = "vllm", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": {"type": backend_type, "endpoint": endpoint, **spec},
        "status": {},
    }


DCGM = "\n".join(
    [
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="n1"} 95',
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",Hostname="n1"} 30',
        'DCGM_FI_DEV_GPU_UTIL{gpu="2",UUID="GPU-c",Hostname="n1"} 10',
        "# TYPE DCGM_FI_DEV_FB_USED gauge",
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",Hostname="n1"} 1000',
        'DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",Hostname="n1"} 1000',
        'DCGM_FI_DEV_FB_USED{gpu="2",UUID="GPU-c",Hostname="n1"} 22000',
        "# TYPE DCGM_FI_DEV_FB_FREE gauge",
        'DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a",Hostname="n1"} 23000',
        'DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-b",Hostname="n1"} 23000',
        'DCGM_FI_DEV_FB_FREE{gpu="2",UUID="GPU-c",Hostname="n1"} 2000',
        "",
    ]
)


def test_dcgm_gpus_have_room_below_90_percent_utilisation_and_framebuffer() -> None:
    gpus = backend_probes.parse_dcgm(DCGM)
    assert sorted(gpus) == ["n1/GPU-a", "n1/GPU-b", "n1/GPU-c"]
    # a: 95% busy; c: framebuffer 22000 of 24000 MiB (92%) used; only b has room.
    assert [gpus[key].has_room() for key in sorted(gpus)] == [False, True, False]
    assert backend_probes.gpu_headroom(gpus, None, declared=0) == 1


def test_a_full_kv_cache_leaves_no_gpu_headroom_whatever_the_gpus_say() -> None:
    idle = {"n/0": backend_probes.Gpu(utilisation=5.0)}
    assert backend_probes.gpu_headroom(idle, 0.95, declared=1) == 0
    assert backend_probes.gpu_headroom(idle, 0.5, declared=4) == 1


def test_gpu_headroom_is_unknown_when_nothing_measures_it() -> None:
    assert backend_probes.gpu_headroom(None, None, declared=8) is None
    assert backend_probes.gpu_headroom({}, None, declared=8) is None
    # Only the KV cache known, with room: the declared GPUs; nothing declared: unknown.
    assert backend_probes.gpu_headroom(None, 0.2, declared=2) == 2
    assert backend_probes.gpu_headroom(None, 0.2, declared=0) is None


@pytest.mark.parametrize("text", ["", "{{", "# TYPE up gauge\nup 1\n"])
def test_metrics_without_the_gauges_give_nothing(text: str) -> None:
    assert backend_probes.parse_dcgm(text) == {}
    assert backend_probes.parse_kv_cache_usage(text) is None


def test_the_kv_cache_usage_is_the_fullest_models() -> None:
    text = (
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{model_name="a"} 0.25\n'
        'vllm:gpu_cache_usage_perc{model_name="b"} 0.75\n'
    )
    assert backend_probes.parse_kv_cache_usage(text) == 0.75


def test_ollama_ps_gives_the_loaded_models_and_nothing_for_another_answer() -> None:
    body = {"models": [{"name": "qwen2:0.5b", "model": "qwen2:0.5b"}, {"model": "gemma3"}]}
    assert backend_probes.parse_ollama_ps(body) == ["gemma3", "qwen2:0.5b"]
    assert backend_probes.parse_ollama_ps({"models": []}) == []
    assert backend_probes.parse_ollama_ps({"error": "not found"}) is None


async def test_a_vllm_probe_measures_latency_load_kv_cache_and_dcgm_gpu_headroom() -> None:
    async with serving_llm(None, load=(3, 1)) as llm, aiohttp.ClientSession() as http:
        llm.kv_cache = 0.4
        llm.gpus = [Gpu(20.0, 1000.0, 23000.0), Gpu(99.0, 1000.0, 23000.0)]
        before = datetime.now(UTC).replace(microsecond=0)
        spec = {"metricsEndpoint": f"{llm.root}/dcgm/metrics"}
        status = await backend_probes.measure(http, backend(llm.url, **spec))
    assert status["reachable"] is True
    assert isinstance(status["latencyMilliseconds"], int) and status["latencyMilliseconds"] >= 0
    assert (status["inFlight"], status["queueDepth"]) == (3, 1)
    assert status["kvCacheUsage"] == 0.4
    assert status["gpuHeadroom"] == 1
    assert status["loadedModels"] is None
    assert parse_time(status["lastProbeTime"]) >= before


async def test_an_ollama_probe_lists_loaded_models_and_leaves_the_request_counts_unknown() -> None:
    async with serving_llm(None) as llm, aiohttp.ClientSession() as http:
        llm.ollama_models = ["qwen2:0.5b"]
        status = await backend_probes.measure(http, backend(llm.url, "ollama"))
    assert status["reachable"] is True
    assert status["loadedModels"] == ["qwen2:0.5b"]
    assert (status["inFlight"], status["queueDepth"], status["gpuHeadroom"]) == (None, None, None)


async def test_an_unreachable_backend_is_measured_as_down_with_everything_else_unknown() -> None:
    async with serving_llm(None) as llm:
        url = llm.url
    async with aiohttp.ClientSession() as http:
        status = await backend_probes.measure(http, backend(url, metricsEndpoint=url))
    assert status["reachable"] is False
    assert "GET " in status["probe"]
    unknown = ("inFlight", "queueDepth", "kvCacheUsage", "gpuHeadroom", "loadedModels")
    assert all(status[key] is None for key in unknown)


async def test_a_backend_serving_a_model_is_timed_to_its_first_streamed_token() -> None:
    async with serving_llm(None) as llm, aiohttp.ClientSession() as http:
        llm.first_token_delay = 0.25
        status = await backend_probes.measure(http, backend(llm.url, "openai", models=["m"]))
        assert llm.probes == 1 and llm.requests == [] and llm.streams == 0  # marked a probe
    assert status["reachable"] is True and status["probeError"] is None
    assert status["timeToFirstTokenMilliseconds"] >= 250  # the server's delay bounds it below


async def test_a_backend_without_a_model_or_with_credentials_is_not_timed() -> None:
    async with serving_llm(None) as llm, aiohttp.ClientSession() as http:
        bare = await backend_probes.measure(http, backend(llm.url, "openai"))
        keyed = backend(llm.url, "openai", models=["m"], credentialsRef={"name": "k"})
        with_key = await backend_probes.measure(http, keyed)
        assert llm.probes == 0
    assert bare["timeToFirstTokenMilliseconds"] is None
    assert with_key["timeToFirstTokenMilliseconds"] is None


async def test_a_first_token_that_never_comes_is_a_probe_error_and_no_figure() -> None:
    async with serving_llm("secret") as llm, aiohttp.ClientSession() as http:
        status = await backend_probes.measure(http, backend(llm.url, "openai", models=["m"]))
    # /models answers 401 (up, wants a key); the chat call is refused: no TTFT, and why.
    assert status["reachable"] is True
    assert status["timeToFirstTokenMilliseconds"] is None
    assert status["probeError"].endswith("/chat/completions: HTTP 401")


async def test_echo_and_endpointless_backends_are_not_probed() -> None:
    async with aiohttp.ClientSession() as http:
        assert await backend_probes.measure(http, {"spec": {"type": "echo"}}) == {}
        assert await backend_probes.measure(http, {"spec": {"type": "openai"}}) == {}


def test_the_probed_condition_keeps_its_transition_time_until_it_flips() -> None:
    first = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    later = datetime(2025, 6, 1, 12, 5, tzinfo=UTC)
    other = {"type": "Other", "status": "True"}
    fresh = backend_probes.probed_condition([other], fresh=True, message="ok", now=first)
    again = backend_probes.probed_condition(fresh, fresh=True, message="ok again", now=later)
    stale = backend_probes.probed_condition(again, fresh=False, message="old", now=later)
    assert again[0] == other and again[1]["lastTransitionTime"] == "2025-06-01T12:00:00Z"
    assert again[1]["message"] == "ok again"
    assert (stale[1]["status"], stale[1]["reason"]) == ("False", "Stale")
    assert stale[1]["lastTransitionTime"] == "2025-06-01T12:05:00Z"


class Answer:
    """A response whose body is `body`."""

    def __init__(self, body: Any) -> None:
        self.body = body

    def json(self) -> Any:
        return self.body


class RecordingApi:
    """The part of `PlntClient` the prober uses: lists, and the status patches and Events
    it records (with no body in the patch's answer, as a server that says nothing)."""

    def __init__(self, lists: list[Callable[[], Awaitable[list[dict[str, Any]]]]]) -> None:
        self.lists = lists
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.posted: list[dict[str, Any]] = []
        self.changed = asyncio.Event()

    async def list_backends(self, *, all_namespaces: bool = False) -> list[dict[str, Any]]:
        assert all_namespaces
        answer = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        return await answer()

    async def list_workflowruns(self, *, namespace: str) -> list[dict[str, Any]]:
        return []  # no runner calls the backend: its status has no breaker

    def object_path(self, plural: str, name: str, *, namespace: str, subresource: str = "") -> str:
        return f"/{plural}/{namespace}/{name}/{subresource}"

    async def request(
        self, method: str, path: str, *, json: Any = None, content_type: str = ""
    ) -> Answer:
        if method == "POST":
            self.posted.append(json)
        else:
            self.patches.append((path, json["status"]))
            self.changed.set()
        return Answer(None)


async def test_the_prober_survives_a_failed_round_and_records_the_next() -> None:
    async with serving_llm(None, load=(2, 0)) as llm:

        async def failing() -> list[dict[str, Any]]:
            raise aiohttp.ClientConnectionError("the API is down")

        async def listing() -> list[dict[str, Any]]:
            return [backend(llm.url)]

        api = RecordingApi([failing, listing])
        async with backend_probes.periodic(api, interval=0.05) as prober:  # type: ignore[arg-type]
            assert prober is not None
            async with asyncio.timeout(10):
                await api.changed.wait()
        path, status = api.patches[0]
        assert path == "/plntbackends/ns/b/status"
        assert (status["reachable"], status["inFlight"]) == (True, 2)
        assert status["conditions"][0]["reason"] == "Fresh"
        assert prober.rounds >= 1


async def test_a_backend_the_prober_cannot_probe_is_marked_stale_with_its_age() -> None:
    old = backend("http://127.0.0.1:1/v1")
    old["status"] = {"lastProbeTime": "2025-06-01T12:00:00Z", "reachable": True}
    old["spec"]["capacity"] = {"gpus": "not a number"}  # the probe raises, as a bug would

    async def listing() -> list[dict[str, Any]]:
        return [old]

    api = RecordingApi([listing])
    async with aiohttp.ClientSession() as http:
        events = EventPoster(api)  # type: ignore[arg-type]
        prober = backend_probes.Prober(api, http, interval=1.0, events=events)  # type: ignore[arg-type]
        await prober.round()
    [(_, status)] = api.patches
    [event] = api.posted  # the Probed condition flipped: one Warning Event
    assert (event["type"], event["reason"]) == ("Warning", "ProbeStale")
    assert event["message"] == status["conditions"][0]["message"]
    [condition] = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Probed",
        "False",
        "Stale",
    )
    assert condition["message"].startswith("last probed ")
    assert condition["message"].endswith(" ago (stale after 3s)")


def test_several_intervals_make_a_status_stale() -> None:
    assert placement.STALE_AFTER_INTERVALS == 3
    assert placement.is_stale(91.0, 90.0) and not placement.is_stale(90.0, 90.0)
    assert not placement.is_stale(None, 90.0) and not placement.is_stale(1e9, None)
