"""Placement: which PlntBackend a run gets, by name or by selector and headroom."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from plnt.sagas.probing import placement


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
    pool: str | None = None,
    probed: str | None = None,
    ttft: int | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"inFlight": in_flight}
    if ttft is not None:
        status["timeToFirstTokenMilliseconds"] = ttft
    if probed is not None:
        status["lastProbeTime"] = probed
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
            "pool": pool,
        },
        "status": status,
    }


def test_a_named_backend_is_chosen_regardless_of_headroom() -> None:
    backends = [backend("a", in_flight=15), backend("b")]
    chosen = placement.choose(backends, name="a", selector=None, gpu_class=None, model=None)
    assert chosen.name == "a"


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
    assert chosen.name == "idle"


def test_equal_headroom_is_broken_by_the_smallest_name() -> None:
    chosen = placement.choose(
        [backend("zeta"), backend("alpha")], name=None, selector={}, gpu_class=None, model=None
    )
    assert chosen.name == "alpha"


def test_gpu_class_model_and_reachability_filter_candidates() -> None:
    backends = [
        backend("l4", gpu_class="l4", models=["llama"]),
        backend("a100-down", gpu_class="a100", models=["llama"], reachable=False),
        backend("a100-mistral", gpu_class="a100", models=["mistral"]),
        backend("a100", gpu_class="a100", models=["llama"], max_concurrency=4),
    ]
    chosen = placement.choose(backends, name=None, selector=None, gpu_class="a100", model="llama")
    assert chosen.name == "a100"


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
    assert chosen.name == "steady"


NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
FRESH = "2025-06-01T11:59:30Z"  # 30 s before NOW
OLD = "2025-06-01T11:55:00Z"  # 5 min before NOW: stale after 90 s


def test_a_pool_restricts_placement_to_its_backends() -> None:
    backends = [
        backend("idle-elsewhere", pool="batch", max_concurrency=64),
        backend("busy-here", pool="interactive", in_flight=12),
        backend("poolless", max_concurrency=64),
    ]
    chosen = placement.choose(
        backends, name=None, selector=None, gpu_class=None, model=None, pool="interactive"
    )
    assert (chosen.name, chosen.headroom) == ("busy-here", 4)
    assert chosen.passed_over == (("idle-elsewhere", "pool batch"), ("poolless", "no pool"))


def test_a_named_backend_outside_the_requested_pool_is_refused() -> None:
    with pytest.raises(placement.NoBackend, match=r'"a" is in pool batch, not pool interactive'):
        placement.choose(
            [backend("a", pool="batch")],
            name="a",
            selector=None,
            gpu_class=None,
            model=None,
            pool="interactive",
        )


def test_a_stale_backend_is_unknown_load_and_loses_to_a_fresh_one_with_less_room() -> None:
    # Stale and reporting idle: its old numbers say 16 free, but they no longer count.
    stale = backend("a-stale", in_flight=0, probed=OLD)
    fresh = backend("b-fresh", in_flight=14, probed=FRESH)
    chosen = placement.choose(
        [stale, fresh], name=None, selector={}, gpu_class=None, model=None, now=NOW, stale_after=90
    )
    assert (chosen.name, chosen.headroom) == ("b-fresh", 2)
    assert chosen.explanation() == "passed over: a-stale (stale 5m00s)"


def test_a_stale_backend_is_a_last_resort_with_unknown_headroom() -> None:
    # Stale and last seen unreachable: unknown now, so neither refused as down nor as free.
    stale = backend("a-stale", reachable=False, probed=OLD)
    full = backend("b-full", in_flight=16, probed=FRESH)
    chosen = placement.choose(
        [stale, full], name=None, selector={}, gpu_class=None, model=None, now=NOW, stale_after=90
    )
    assert (chosen.name, chosen.headroom) == ("a-stale", None)
    assert chosen.explanation() == "passed over: b-full (headroom 0)"


def test_without_a_probe_interval_no_status_is_stale() -> None:
    old = backend("a", in_flight=2, probed=OLD)
    chosen = placement.choose([old], name=None, selector={}, gpu_class=None, model=None, now=NOW)
    assert chosen.headroom == 14


def test_a_backend_without_headroom_is_never_chosen_and_the_refusal_names_each_reason() -> None:
    backends = [
        backend("full", in_flight=8, queue_depth=8),
        backend("overloaded", max_concurrency=4, in_flight=4, queue_depth=3),
        backend("down", reachable=False),
        backend("l4", gpu_class="l4"),
    ]
    with pytest.raises(placement.NoBackend) as raised:
        placement.choose(backends, name=None, selector=None, gpu_class="a100", model=None)
    assert str(raised.value).endswith(
        "matches gpuClass a100 (4 exist): down (gpuClass none), full (gpuClass none), "
        "l4 (gpuClass l4), overloaded (gpuClass none)"
    )
    with pytest.raises(placement.NoBackend) as raised:
        placement.choose(backends[:3], name=None, selector={}, gpu_class=None, model=None)
    assert str(raised.value) == (
        "no reachable PlntBackend with headroom matches selector {} (3 exist): "
        "down (unreachable), full (headroom 0), overloaded (headroom -3)"
    )


def test_the_choice_explains_the_winner_and_every_other_candidate() -> None:
    backends = [
        backend("a", reachable=False, labels={"tier": "gpu"}),
        backend("b", in_flight=16, labels={"tier": "gpu"}),
        backend("c", in_flight=10, labels={"tier": "gpu"}),
        backend("d", in_flight=4, labels={"tier": "gpu"}, models=["llama"]),
        backend("e", labels={"tier": "gpu"}, models=["mistral"]),
        backend("f", labels={"tier": "cpu"}),
    ]
    chosen = placement.choose(
        backends,
        name=None,
        selector={"matchLabels": {"tier": "gpu"}},
        gpu_class=None,
        model="llama",
    )
    assert (chosen.name, chosen.headroom) == ("d", 12)
    assert chosen.explanation() == (
        "passed over: a (unreachable), b (headroom 0), c (headroom 6), "
        "e (no model llama), f (labels do not match)"
    )


def test_a_long_explanation_is_cut_to_a_few_names() -> None:
    backends = [backend("winner")] + [backend(f"full-{i}", in_flight=16) for i in range(9)]
    chosen = placement.choose(backends, name=None, selector={}, gpu_class=None, model=None)
    explanation = chosen.explanation()
    assert explanation is not None and explanation.endswith("full-5 (headroom 0) and 3 more")


def test_a_lone_candidate_has_nothing_to_explain() -> None:
    chosen = placement.choose([backend("a")], name=None, selector={}, gpu_class=None, model=None)
    assert chosen.explanation() is None


def test_gpu_headroom_breaks_a_tie_in_concurrency_headroom() -> None:
    cold, warm = backend("a-cold"), backend("b-roomy")
    cold["status"]["gpuHeadroom"] = 0
    warm["status"]["gpuHeadroom"] = 2
    chosen = placement.choose([cold, warm], name=None, selector={}, gpu_class=None, model=None)
    assert chosen.name == "b-roomy"


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59.9, "59s"), (65, "1m05s"), (7380, "2h03m")]
)
def test_ages_are_short(seconds: float, text: str) -> None:
    assert placement.format_age(seconds) == text


def test_a_ttft_objective_prefers_a_backend_that_meets_it_over_one_with_more_room() -> None:
    backends = [
        backend("roomy-slow", in_flight=0, ttft=900),
        backend("busy-fast", in_flight=12, ttft=120),
        backend("unmeasured", in_flight=2),
    ]
    chosen = placement.choose(
        backends, name=None, selector={}, gpu_class=None, model=None, ttft_objective_ms=500
    )
    assert (chosen.name, chosen.headroom) == ("busy-fast", 4)
    assert chosen.explanation() == (
        "TTFT 120 ms meets objective 500 ms; passed over: "
        "roomy-slow (TTFT 900 ms > objective 500 ms), "
        "unmeasured (TTFT not measured (objective 500 ms))"
    )
    # Without the objective, headroom alone decides, as before.
    plain = placement.choose(backends, name=None, selector={}, gpu_class=None, model=None)
    assert plain.name == "roomy-slow" and plain.why is None


def test_a_backend_that_misses_the_ttft_objective_is_still_chosen_when_nothing_else_has_room() -> (
    None
):
    backends = [backend("slow", ttft=900), backend("full-fast", in_flight=16, ttft=50)]
    chosen = placement.choose(
        backends, name=None, selector={}, gpu_class=None, model=None, ttft_objective_ms=500
    )
    assert chosen.name == "slow"
    assert chosen.explanation() == (
        "TTFT 900 ms > objective 500 ms; passed over: full-fast (headroom 0)"
    )
    unmeasured = placement.choose(
        [backend("slow", ttft=900), backend("new")],
        name=None,
        selector={},
        gpu_class=None,
        model=None,
        ttft_objective_ms=500,
    )
    assert unmeasured.name == "new"  # not known to miss beats known to miss


def test_a_named_backend_says_how_its_ttft_stands_against_the_objective() -> None:
    chosen = placement.choose(
        [backend("a", ttft=700)],
        name="a",
        selector=None,
        gpu_class=None,
        model=None,
        ttft_objective_ms=500,
    )
    assert chosen.name == "a" and chosen.explanation() == "TTFT 700 ms > objective 500 ms"
