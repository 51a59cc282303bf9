"""The resolve activity: it probes, honours the requested pool and explains its choice.

The backends are LLM stand-ins (tests/support/llm.py); the API is a `PlntClient` whose
reads answer from a dict and whose status patches are recorded, since what is tested is
what the activity asks and returns (tests/deploy runs it against the real server).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from plnt.client import transport
from plnt.client.clients import PlntClient
from plnt.client.kubeconfig import Connection
from plnt.sagas import values as v
from plnt.sagas.deploying.activities import DeployActivities
from plnt.sagas.failures import Failure
from plnt.sagas.speccache import SpecCache
from plnt.sagas.targets.local import LocalTarget
from plnt.sagas.worker import placement_activities
from tests.support.llm import serving_llm


class AnsweringApi(PlntClient):
    """Backends from memory; status patches recorded (and Events posted, by reason)."""

    def __init__(self, backends: list[dict[str, Any]]) -> None:
        super().__init__(Connection(server="https://127.0.0.1:9"))
        self.backends = backends
        self.patched: list[str] = []
        self.events: list[str] = []

    async def list_backends(
        self, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[dict[str, Any]]:
        return [b for b in self.backends if b["metadata"]["namespace"] == namespace]

    async def request(self, method: str, path: str, **options: Any) -> Any:
        if path.endswith("/events"):
            self.events.append(str((options.get("json") or {}).get("reason")))
            return transport.Response(201, {"Content-Type": "application/json"}, b"{}")
        if method == "GET" and path.endswith("/workflowruns"):  # the breakers' runners: none
            return transport.Response(200, {"Content-Type": "application/json"}, b"{}")
        self.patched.append(path.rsplit("/", 2)[-2])
        return transport.Response(200, {"Content-Type": "application/json"}, b"{}")


def backend(name: str, url: str, *, pool: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {"tier": "gpu"}},
        "spec": {"type": "vllm", "endpoint": url, "pool": pool, "models": ["m"]},
    }


@pytest.fixture
async def environment() -> AsyncIterator[ActivityEnvironment]:
    yield ActivityEnvironment()


async def resolved_with(
    tmp_path: Path,
    environment: ActivityEnvironment,
    api: AnsweringApi,
    *,
    pool: str | None = None,
    fallback: str | None = None,
) -> v.Resolved:
    activities = DeployActivities(
        api=api, target=LocalTarget(tmp_path / "runners"), specs=SpecCache(tmp_path / "specs")
    )
    try:
        selector = {"matchLabels": {"tier": "gpu"}}
        request = v.ResolveRequest(
            namespace="ns", selector=selector, pool=pool, fallback=fallback, fallback_model="tiny"
        )
        resolved: v.Resolved = await environment.run(
            placement_activities(activities).resolve, request
        )
        return resolved
    finally:
        await activities.close()


async def test_resolve_names_the_winners_headroom_and_why_the_others_lost(
    tmp_path: Path, environment: ActivityEnvironment
) -> None:
    async with serving_llm(None) as gone:
        down = gone.url  # a port that no longer answers
    async with (
        serving_llm(None, load=(16, 0)) as full,
        serving_llm(None, load=(4, 0)) as calm,
    ):
        api = AnsweringApi(
            [backend("a-down", down), backend("b-full", full.url), backend("c-calm", calm.url)]
        )
        resolved = await resolved_with(tmp_path, environment, api)
    assert resolved.backend.name == "c-calm" and resolved.headroom == 12
    assert resolved.explanation == "passed over: a-down (unreachable), b-full (headroom 0)"
    assert sorted(api.patched) == ["a-down", "b-full", "c-calm"]  # every probe recorded
    # First probes are transitions from nothing: each backend's reachability is an Event.
    assert "BackendUnreachable" in api.events and "BackendReachable" in api.events


async def test_resolve_places_within_the_pool_the_run_asks_for(
    tmp_path: Path, environment: ActivityEnvironment
) -> None:
    async with serving_llm(None, load=(0, 0)) as idle, serving_llm(None, load=(10, 0)) as busy:
        api = AnsweringApi(
            [
                backend("a-idle", idle.url, pool="batch"),
                backend("b-busy", busy.url, pool="interactive"),
            ]
        )
        resolved = await resolved_with(tmp_path, environment, api, pool="interactive")
    assert (resolved.backend.name, resolved.headroom) == ("b-busy", 6)
    assert resolved.explanation == "passed over: a-idle (pool batch)"


async def test_resolve_refuses_when_no_backend_has_headroom_naming_each(
    tmp_path: Path, environment: ActivityEnvironment
) -> None:
    async with serving_llm(None, load=(20, 3)) as full:
        api = AnsweringApi([backend("a-full", full.url)])
        with pytest.raises(ApplicationError) as raised:
            await resolved_with(tmp_path, environment, api)
    assert raised.value.type == Failure.NO_BACKEND.value
    assert str(raised.value).endswith("(1 exist): a-full (headroom -7)")


async def test_resolve_hands_the_named_fallback_beside_the_primary_even_when_it_is_down(
    tmp_path: Path, environment: ActivityEnvironment
) -> None:
    async with serving_llm(None) as gone:
        down = gone.url  # the fallback need not answer at deploy time
    async with serving_llm(None, load=(0, 0)) as primary:
        spare = {
            "metadata": {"name": "small", "namespace": "ns"},
            "spec": {"type": "openai", "endpoint": down, "capacity": {"maxConcurrency": 3}},
        }
        api = AnsweringApi([backend("big", primary.url), spare])
        resolved = await resolved_with(tmp_path, environment, api, fallback="small")
    assert resolved.backend.name == "big"
    fallback = resolved.backend.fallback
    assert fallback is not None
    assert (fallback.name, fallback.endpoint, fallback.model) == ("small", down, "tiny")
    assert fallback.max_concurrency == 3 and fallback.fallback is None


async def test_resolve_refuses_a_fallback_that_does_not_exist_naming_spec_fallback(
    tmp_path: Path, environment: ActivityEnvironment
) -> None:
    async with serving_llm(None, load=(0, 0)) as primary:
        api = AnsweringApi([backend("big", primary.url)])
        with pytest.raises(ApplicationError) as raised:
            await resolved_with(tmp_path, environment, api, fallback="nowhere")
    assert raised.value.type == Failure.NO_BACKEND.value
    assert 'spec.fallback.name: PlntBackend "nowhere" not found in ns' in str(raised.value)


async def test_resolve_gives_the_runner_the_pools_other_backends_to_spill_to(
    tmp_path: Path, environment: ActivityEnvironment
) -> None:
    async with (
        serving_llm(None, load=(0, 0)) as idle,
        serving_llm(None, load=(4, 0)) as other,
        serving_llm(None, load=(0, 0)) as keyed,
        serving_llm(None, load=(0, 0)) as elsewhere,
    ):
        with_key = backend("c-keyed", keyed.url, pool="interactive")
        with_key["spec"]["credentialsRef"] = {"name": "secret", "key": "token"}
        api = AnsweringApi(
            [
                backend("a-idle", idle.url, pool="interactive"),
                backend("b-other", other.url, pool="interactive"),
                with_key,
                backend("d-elsewhere", elsewhere.url, pool="batch"),
            ]
        )
        resolved = await resolved_with(tmp_path, environment, api, pool="interactive")
        without_pool = await resolved_with(tmp_path, environment, api)
    assert resolved.backend.name == "a-idle"
    # The pool's other member that needs no key; not the one with credentials (the runner
    # holds only its own backend's key), nor another pool's.
    assert resolved.backend.spill == [
        v.Backend(name="b-other", type="vllm", endpoint=other.url, model="m")
    ]
    assert without_pool.backend.spill == []
