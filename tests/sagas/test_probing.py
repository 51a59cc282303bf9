"""Judging a canary: the analysis plan, and the verdict's messages (measured against limits)."""

from __future__ import annotations

import aiohttp
import pytest

from plnt.processes import llamaserving
from plnt.sagas.probing import probes as probing
from tests.support.bench_results import bench
from tests.support.llm import serving_llm


def test_a_slow_canary_fails_with_measured_p95_against_the_limit_and_the_stable() -> None:
    with pytest.raises(probing.AnalysisFailed) as raised:
        probing.judge(
            bench("canary", 412.0), bench("stable", 120.0), probing.Limits(max_p95_ms=250)
        )
    assert str(raised.value) == "analysis failed: p95 412 ms > limit 250 ms; stable 120 ms"


def test_every_failed_limit_is_named_with_the_stable_beside_it() -> None:
    canary = bench("canary", 90.0, errors=5, cache=0.1)
    stable = bench("stable", 80.0, cache=0.8)
    limits = probing.Limits(max_error_rate=0.1, max_p95_ms=100, min_cache_hit_rate=0.5)
    with pytest.raises(probing.AnalysisFailed) as raised:
        probing.judge(canary, stable, limits)
    assert str(raised.value) == (
        "analysis failed: error rate 0.25 > limit 0.10; stable 0.00;"
        " cache hit rate 0.10 < limit 0.50; stable 0.80"
    )


def test_a_cache_limit_fails_when_the_hit_rate_cannot_be_measured() -> None:
    with pytest.raises(probing.AnalysisFailed, match=r"cache hit rate unmeasured \(no step"):
        probing.judge(bench("canary", 5.0), None, probing.Limits(min_cache_hit_rate=0.5))


def test_a_canary_without_one_successful_request_has_no_p95_to_pass() -> None:
    canary = bench("canary", 0.0, requests=4, errors=4)
    with pytest.raises(probing.AnalysisFailed, match="p95 unmeasured: no request succeeded"):
        probing.judge(canary, None, probing.Limits(max_p95_ms=100))


def test_a_healthy_canary_passes_with_each_measurement_against_its_limit() -> None:
    canary, stable = bench("canary", 7.0, rate=50.0, cache=0.9), bench("stable", 6.0, cache=0.8)
    limits = probing.Limits(max_error_rate=0.0, max_p95_ms=50, min_cache_hit_rate=0.5)
    verdict = probing.judge(canary, stable, limits)
    assert verdict.error_rate == 0.0 and verdict.p95 == 7.0 and verdict.stable_p95 == 6.0
    assert verdict.message == (
        "analysis passed: 20 requests at 50.0/s (requested 50/s),"
        " p95 7 ms <= limit 50 ms; stable 6 ms, error rate 0.00 <= limit 0.00; stable 0.00,"
        " cache hit rate 0.90 >= limit 0.50; stable 0.80"
    )


def test_without_limits_the_verdict_reports_what_was_measured() -> None:
    verdict = probing.judge(bench("canary", 7.0), None, probing.Limits())
    assert verdict.message == "analysis passed: 20 requests, error rate 0.00, p95 7 ms"


def test_the_original_form_is_count_bound_and_rate_makes_an_open_loop() -> None:
    original = probing.analysis_plan(requests=30, rate=None, duration=None, inputs={"a": 1})
    assert (original.requests, original.concurrency, original.rate) == (30, 4, None)
    assert original.inputs == ({"a": 1},)
    timed = probing.analysis_plan(requests=30, rate=None, duration=5.0, inputs={})
    assert (timed.requests, timed.concurrency, timed.duration_seconds) == (None, 4, 5.0)
    open_loop = probing.analysis_plan(requests=30, rate=40.0, duration=None, inputs={})
    assert (open_loop.rate, open_loop.concurrency, open_loop.requests) == (40.0, None, None)
    assert open_loop.duration_seconds == probing.DEFAULT_DURATION


def test_replicas_of_one_revision_share_a_label() -> None:
    endpoints = probing.analysis_endpoints(["http://a:1", "http://b:2"], ["http://c:3"])
    assert [(e.label, e.invoke_url) for e in endpoints] == [
        ("canary", "http://a:1/invoke"),
        ("canary", "http://b:2/invoke"),
        ("stable", "http://c:3/invoke"),
    ]
    assert endpoints[2].runner_metrics_urls == ("http://c:3/metrics",)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("http://gpu:8000/v1", "http://gpu:8000/metrics"),
        ("http://gpu:8000/v1/", "http://gpu:8000/metrics"),
        ("https://proxy.example/vllm/a/v1", "https://proxy.example/vllm/a/metrics"),
        ("http://gpu:8000", "http://gpu:8000/metrics"),
    ],
)
def test_vllm_metrics_live_at_the_server_root_beside_v1(endpoint: str, expected: str) -> None:
    assert probing.metrics_url(endpoint) == expected


def test_vllm_load_sums_the_scheduler_gauges_over_models() -> None:
    text = "\n".join(
        [
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{model_name="a"} 3.0',
            'vllm:num_requests_running{model_name="b"} 2.0',
            "# TYPE vllm:num_requests_waiting gauge",
            'vllm:num_requests_waiting{model_name="a"} 7.0',
            "# TYPE vllm:gpu_cache_usage_perc gauge",
            'vllm:gpu_cache_usage_perc{model_name="a"} 0.5',
            "",
        ]
    )
    assert probing.parse_vllm_load(text) == probing.BackendLoad(in_flight=5, queue_depth=7)


def test_plnts_model_server_load_is_read_where_vllms_gauges_are_absent() -> None:
    text = llamaserving.metrics_text(llamaserving.Load(in_flight=3), model="m")
    assert probing.parse_vllm_load(text) is None
    assert probing.parse_load(text) == probing.BackendLoad(in_flight=1, queue_depth=2)


@pytest.mark.parametrize(
    "text", ["", "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.0\n", "{{"]
)
def test_metrics_without_the_scheduler_gauges_give_no_load(text: str) -> None:
    assert probing.parse_vllm_load(text) is None
    assert probing.parse_load(text) is None


async def test_backend_load_reads_a_servers_metrics_and_tolerates_none() -> None:
    async with (
        serving_llm(None, load=(4, 2)) as busy,
        serving_llm(None) as silent,
        aiohttp.ClientSession() as session,
    ):
        load, detail = await probing.backend_load(session, busy.url)
        assert load == probing.BackendLoad(in_flight=4, queue_depth=2)
        assert detail.endswith("/metrics: ok")
        unknown, why = await probing.backend_load(session, silent.url)
        assert unknown is None and why.endswith("/metrics: HTTP 404")
