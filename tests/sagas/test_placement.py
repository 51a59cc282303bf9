"""Placement: which PlntBackend a run gets, by name or by selector and headroom."""

from __future__ import annotations

from typing import Any

import pytest

from plnt.sagas import placement


def backend(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    max_concurrency: int = 16,
    in_flight: int = 0,
    queue_depth: int | None = None,
    gpu_class: str | None = None,
    models: list[str] | None = None,
    reachable: bool | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"inFlight": in_flight}
    if queue_depth is not None:
        status["queueDepth"] = queue_depth
    if reachable is not None:
        status["reachable"] = reachable
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "type": "openai",
            "endpoint": f"http://{name}:8000/v1",
            "capacity": {"maxConcurrency": max_concurrency},
            "gpuClass": gpu_class,
            "models": models or [],
        },
        "status": status,
    }


def test_a_named_backend_is_chosen_regardless_of_headroom() -> None:
    backends = [backend("a", in_flight=15), backend("b")]
    chosen = placement.choose(backends, name="a", selector=None, gpu_class=None, model=None)
    assert chosen["metadata"]["name"] == "a"


def test_an_unknown_name_lists_what_exists() -> None:
    with pytest.raises(placement.NoBackend, match=r'"c" not found; the namespace has a, b'):
        placement.choose(
            [backend("b"), backend("a")], name="c", selector=None, gpu_class=None, model=None
        )


def test_an_unreachable_named_backend_is_refused() -> None:
    with pytest.raises(placement.NoBackend, match="unreachable"):
        placement.choose(
            [backend("a", reachable=False)], name="a", selector=None, gpu_class=None, model=None
        )


def test_the_selector_picks_the_matching_backend_with_most_headroom() -> None:
    backends = [
        backend("busy", labels={"pool": "gpu"}, max_concurrency=8, in_flight=6),
        backend("idle", labels={"pool": "gpu"}, max_concurrency=8, in_flight=1),
        backend("other", labels={"pool": "cpu"}, max_concurrency=64),
    ]
    chosen = placement.choose(
        backends, name=None, selector={"matchLabels": {"pool": "gpu"}}, gpu_class=None, model=None
    )
    assert chosen["metadata"]["name"] == "idle"


def test_equal_headroom_is_broken_by_the_smallest_name() -> None:
    chosen = placement.choose(
        [backend("zeta"), backend("alpha")], name=None, selector={}, gpu_class=None, model=None
    )
    assert chosen["metadata"]["name"] == "alpha"


def test_gpu_class_model_and_reachability_filter_candidates() -> None:
    backends = [
        backend("l4", gpu_class="l4", models=["llama"]),
        backend("a100-down", gpu_class="a100", models=["llama"], reachable=False),
        backend("a100-mistral", gpu_class="a100", models=["mistral"]),
        backend("a100", gpu_class="a100", models=["llama"], max_concurrency=4),
    ]
    chosen = placement.choose(backends, name=None, selector=None, gpu_class="a100", model="llama")
    assert chosen["metadata"]["name"] == "a100"


def test_no_match_says_what_was_asked() -> None:
    with pytest.raises(placement.NoBackend, match=r"gpuClass h100 .*\(1 exist\)"):
        placement.choose([backend("a")], name=None, selector=None, gpu_class="h100", model=None)


@pytest.mark.parametrize(
    ("expression", "labels", "expected"),
    [
        ({"key": "tier", "operator": "In", "values": ["a", "b"]}, {"tier": "b"}, True),
        ({"key": "tier", "operator": "In", "values": ["a"]}, {}, False),
        ({"key": "tier", "operator": "NotIn", "values": ["a"]}, {"tier": "a"}, False),
        ({"key": "tier", "operator": "NotIn", "values": ["a"]}, {}, True),
        ({"key": "tier", "operator": "Exists"}, {"tier": ""}, True),
        ({"key": "tier", "operator": "DoesNotExist"}, {"tier": "x"}, False),
    ],
)
def test_match_expressions_follow_label_selector_semantics(
    expression: dict[str, Any], labels: dict[str, str], expected: bool
) -> None:
    assert placement.matches_selector(labels, {"matchExpressions": [expression]}) is expected


def test_requests_waiting_in_a_backends_queue_count_against_its_headroom() -> None:
    queued = backend("queued", max_concurrency=16, in_flight=2, queue_depth=12)
    steady = backend("steady", max_concurrency=16, in_flight=8)
    assert (placement.headroom(queued), placement.headroom(steady)) == (2, 8)
    chosen = placement.choose([queued, steady], name=None, selector={}, gpu_class=None, model=None)
    assert chosen["metadata"]["name"] == "steady"
