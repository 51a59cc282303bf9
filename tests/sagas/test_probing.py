"""Judging a canary: percentiles and the analysis verdict's messages."""

from __future__ import annotations

import aiohttp
import pytest

from plnt.sagas import probing
from tests.support.llm import serving_llm


def samples(*milliseconds: float, failures: int = 0) -> list[probing.Sample]:
    return [probing.Sample(True, ms) for ms in milliseconds] + [
        probing.Sample(False, 1.0) for _ in range(failures)
    ]


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert probing.percentile(values, 0.95) == 95.0
    assert probing.percentile(values, 0.5) == 50.0
    assert probing.percentile([7.0], 0.95) == 7.0
    assert probing.percentile([], 0.95) == 0.0


def test_a_slow_canary_fails_with_measured_p95_against_the_limit_and_the_stable() -> None:
    canary = samples(*([100.0] * 18 + [412.0, 500.0]))
    stable = samples(*([120.0] * 20))
    with pytest.raises(probing.AnalysisFailed) as raised:
        probing.judge(canary, stable, max_error_rate=None, max_p95=250)
    assert str(raised.value) == "analysis failed: p95 412 ms > limit 250 ms (stable p95 120 ms)"


def test_an_erroring_canary_fails_naming_the_error_rate() -> None:
    with pytest.raises(probing.AnalysisFailed, match=r"error rate 0\.25 > limit 0\.10"):
        probing.judge(samples(10.0, 10.0, 10.0, failures=1), None, max_error_rate=0.1, max_p95=None)


def test_a_healthy_canary_passes_with_its_measurements() -> None:
    verdict = probing.judge(samples(5.0, 6.0, 7.0), None, max_error_rate=0.0, max_p95=50)
    assert verdict.error_rate == 0.0 and verdict.p95 == 7.0
    assert verdict.message == "analysis passed: 3 requests, error rate 0.00, p95 7 ms"


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


@pytest.mark.parametrize(
    "text", ["", "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.0\n", "{{"]
)
def test_metrics_without_the_scheduler_gauges_give_no_load(text: str) -> None:
    assert probing.parse_vllm_load(text) is None


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
