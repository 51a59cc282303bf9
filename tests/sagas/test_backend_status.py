"""Writing a PlntBackend's status with the Events of its transitions (`backend_status`),
against a stand-in of the API that keeps one backend and checks resourceVersions, and
what a probe reports as its failure (`probeError`), against the LLM stand-in."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import aiohttp

from plnt.client import errors as client_errors
from plnt.client.events import EventPoster
from plnt.sagas.probing import backend_probes, backend_status
from tests.support.llm import Gpu, serving_llm


class Answer:
    def __init__(self, body: Any) -> None:
        self.body = body

    def json(self) -> Any:
        return self.body


class OneBackendApi:
    """Holds one PlntBackend: status merge patches are refused with 409 when they carry a
    stale resourceVersion; Events are kept as created and counted as patched."""

    def __init__(self, backend: dict[str, Any]) -> None:
        self.backend = copy.deepcopy(backend)
        self.backend["metadata"].setdefault("resourceVersion", "1")
        self.events: dict[str, dict[str, Any]] = {}
        self.writes = 0
        self.conflicts = 0

    def object_path(self, plural: str, name: str, *, namespace: str, subresource: str = "") -> str:
        return f"/{plural}/{namespace}/{name}" + (f"/{subresource}" if subresource else "")

    def bump(self, status: Mapping[str, Any]) -> None:
        """Another writer's status write."""
        self.backend["status"] = {**(self.backend.get("status") or {}), **status}
        meta = self.backend["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    async def request(
        self, method: str, path: str, *, json: Any = None, content_type: str = ""
    ) -> Answer:
        if path.startswith("/api/v1/"):
            if method == "POST":
                self.events[json["metadata"]["name"]] = copy.deepcopy(json)
            else:
                self.events[path.rsplit("/", 1)[1]].update(json)
            return Answer(json)
        if method == "GET":
            return Answer(copy.deepcopy(self.backend))
        stated = (json.get("metadata") or {}).get("resourceVersion")
        if stated is not None and stated != self.backend["metadata"]["resourceVersion"]:
            self.conflicts += 1
            raise client_errors.Conflict("the object has been modified", code=409)
        merged = {**(self.backend.get("status") or {}), **json["status"]}
        self.bump({})
        self.backend["status"] = {k: v for k, v in merged.items() if v is not None}
        self.writes += 1
        return Answer(copy.deepcopy(self.backend))

    def reasons(self) -> list[tuple[str, int]]:
        ordered = sorted(self.events.values(), key=lambda e: e["metadata"]["name"])
        return [(e["reason"], e["count"]) for e in ordered]


def backend(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "metadata": {"name": "gpu-a", "namespace": "ns", "uid": "u-1"},
        "spec": {"type": "openai", "endpoint": "http://gpu-a/v1"},
        "status": status or {},
    }


def setting(**fields: Any) -> backend_status.PatchFor:
    return lambda current: dict(fields)


async def test_each_transition_is_one_event_about_the_backend_and_an_unchanged_probe_none() -> None:
    api = OneBackendApi(backend())
    events = EventPoster(api)  # type: ignore[arg-type]
    for _ in range(3):
        await backend_status.record(
            api,  # type: ignore[arg-type]
            api.backend,
            setting(reachable=True, latencyMilliseconds=3),
            events=events,
        )
    assert api.writes == 3 and api.reasons() == [("BackendReachable", 1)]
    [event] = api.events.values()
    assert event["involvedObject"] == {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "name": "gpu-a",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "2",
    }
    assert event["type"] == "Normal" and event["source"] == {"component": "plnt-prober"}
    assert event["reportingComponent"] == "plnt-prober"


async def test_a_flapping_backend_counts_its_repeats_into_the_same_events() -> None:
    api = OneBackendApi(backend({"reachable": True}))
    events = EventPoster(api)  # type: ignore[arg-type]
    for _ in range(3):
        for reachable, error in ((False, "GET …: refused"), (True, None)):
            await backend_status.record(
                api,  # type: ignore[arg-type]
                api.backend,
                setting(reachable=reachable, probeError=error),
                events=events,
            )
    assert api.reasons() == [("BackendUnreachable", 3), ("BackendReachable", 3)]
    unreachable = next(e for e in api.events.values() if e["reason"] == "BackendUnreachable")
    assert unreachable["type"] == "Warning" and unreachable["message"] == "GET …: refused"
    assert unreachable["lastTimestamp"] >= unreachable["firstTimestamp"]


async def test_a_writer_whose_read_is_stale_decides_again_against_the_newer_status() -> None:
    api = OneBackendApi(backend({"reachable": True}))
    listed = copy.deepcopy(api.backend)  # what this writer read
    api.bump({"reachable": False, "probeError": "refused"})  # another worker saw it go down
    events = EventPoster(api)  # type: ignore[arg-type]
    written = await backend_status.record(
        api,  # type: ignore[arg-type]
        listed,
        setting(reachable=False, probeError="refused"),
        events=events,
    )
    assert api.conflicts == 1 and api.writes == 1
    assert written is not None and written["status"]["reachable"] is False
    assert api.events == {}  # the other writer made that transition, not this one


async def test_a_patch_that_decides_nothing_writes_nothing() -> None:
    api = OneBackendApi(backend({"reachable": True}))
    written = await backend_status.record(
        api,  # type: ignore[arg-type]
        api.backend,
        lambda current: None,
        events=EventPoster(api),  # type: ignore[arg-type]
    )
    assert written is None and api.writes == 0 and api.events == {}


async def test_a_probe_names_its_first_failing_request_as_its_error() -> None:
    async with serving_llm(None, load=(1, 0)) as llm, aiohttp.ClientSession() as http:
        spec = {"type": "vllm", "endpoint": llm.url, "metricsEndpoint": f"{llm.root}/dcgm/metrics"}
        missing_dcgm = await backend_probes.measure(http, {"spec": spec})
        llm.gpus = [Gpu(20.0, 1000.0, 23000.0)]
        answered = await backend_probes.measure(http, {"spec": spec})
        llm.load = None
        missing_metrics = await backend_probes.measure(http, {"spec": spec})
        url = llm.url
    async with aiohttp.ClientSession() as http:
        down = await backend_probes.measure(http, {"spec": {**spec, "endpoint": url}})
    assert missing_dcgm["probeError"] == f"GET {llm.root}/dcgm/metrics: HTTP 404"
    assert answered["probeError"] is None and answered["reachable"] is True
    assert missing_metrics["probeError"] == f"GET {llm.root}/metrics: HTTP 404"
    assert down["reachable"] is False and down["probeError"] == down["probe"]
    assert down["probeError"].startswith(f"GET {url}/models: ")


async def test_a_backend_respecified_meanwhile_is_not_written_with_the_old_measurement() -> None:
    api = OneBackendApi(backend({"reachable": True}))
    listed = copy.deepcopy(api.backend)
    api.backend["metadata"]["generation"] = 2  # a new endpoint, say
    api.bump({})
    written = await backend_status.record(
        api,  # type: ignore[arg-type]
        listed,
        setting(reachable=False, probeError="refused"),
        events=EventPoster(api),  # type: ignore[arg-type]
    )
    assert written is None and api.conflicts == 1 and api.writes == 0 and api.events == {}
