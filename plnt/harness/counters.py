"""Counters read from outside the requests: the runners' step cache, the backend's GPU.

Step-cache hit rate is the delta of the runners' `plnt_runner_cache_hits` and
`plnt_runner_cache_misses` counters between the start and the end of the measured phase,
summed over every runner the endpoint names (any runner family whose name holds
`cache_hits` / `cache_misses` counts, so a renamed counter still reads).

GPU utilisation is sampled from the backend's metrics URL about once a second over the
measured phase: the mean of DCGM exporter's `DCGM_FI_DEV_GPU_UTIL` (percent, averaged over
the GPUs of one sample, then over the samples), and vLLM's KV-cache usage
(`vllm:gpu_cache_usage_perc`, newer vLLM `vllm:kv_cache_usage_perc`, 0..1, reported in
percent). Without a URL, or when the URL never answers with the family, the value is None
and the reason says why: never a made-up 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

_RUNNER_PREFIX = "plnt_runner"
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
KV_CACHE_FAMILIES: tuple[str, ...] = ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc")
_SCRAPE_TIMEOUT = aiohttp.ClientTimeout(total=5)


async def scrape(
    session: aiohttp.ClientSession, url: str, *, headers: dict[str, str] | None = None
) -> tuple[str | None, str]:
    """(`GET url`'s text when it answers 200, else None; what happened, for a reason)."""
    try:
        async with session.get(url, timeout=_SCRAPE_TIMEOUT, headers=headers) as response:
            if response.status != 200:
                return None, f"GET {url}: HTTP {response.status}"
            return await response.text(), f"GET {url}: ok"
    except (aiohttp.ClientError, TimeoutError) as error:
        return None, f"GET {url}: {error or type(error).__name__}"


def _families(text: str) -> dict[str, list[float]]:
    """Family name → sample values (counters' `_created` samples left out)."""
    found: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            values = [s.value for s in family.samples if not s.name.endswith("_created")]
            found.setdefault(family.name, []).extend(values)
    except ValueError:
        return {}
    return found


def runner_cache_counts(text: str) -> tuple[float, float] | None:
    """(hits, misses) in one runner's metrics text; None when it has no cache counters."""
    hits = misses = None
    for name, values in _families(text).items():
        if not name.startswith(_RUNNER_PREFIX):
            continue
        if name.endswith("cache_hits"):
            hits = (hits or 0.0) + sum(values)
        elif name.endswith("cache_misses"):
            misses = (misses or 0.0) + sum(values)
    if hits is None or misses is None:
        return None
    return hits, misses


@dataclass(frozen=True)
class CacheSnapshot:
    """The summed counters of every runner, or why they could not be read."""

    hits: float
    misses: float
    problem: str | None = None


async def cache_snapshot(session: aiohttp.ClientSession, urls: Sequence[str]) -> CacheSnapshot:
    """Read every runner's cache counters at once and sum them."""
    texts = await asyncio.gather(*(scrape(session, url) for url in urls))
    hits = misses = 0.0
    for (text, detail), url in zip(texts, urls, strict=True):
        if text is None:
            return CacheSnapshot(0.0, 0.0, detail)
        counts = runner_cache_counts(text)
        if counts is None:
            return CacheSnapshot(0.0, 0.0, f"{url} has no plnt_runner cache counters")
        hits, misses = hits + counts[0], misses + counts[1]
    return CacheSnapshot(hits, misses)


def cache_hit_rate(before: CacheSnapshot, after: CacheSnapshot) -> tuple[float | None, str | None]:
    """(hit rate over the interval, None) or (None, why not)."""
    problem = before.problem or after.problem
    if problem is not None:
        return None, problem
    hits, misses = after.hits - before.hits, after.misses - before.misses
    if hits < 0 or misses < 0:
        return None, "a runner's cache counters went down (it restarted during the bench)"
    if hits + misses == 0:
        return None, "no step consulted the cache (no cacheable step, or the cache is off)"
    return hits / (hits + misses), None


def gpu_sample(text: str) -> tuple[float | None, float | None]:
    """(mean DCGM GPU utilisation %, KV-cache usage %) in one metrics text, each if present."""
    families = _families(text)
    utilisation = families.get(DCGM_GPU_UTIL)
    gpu = sum(utilisation) / len(utilisation) if utilisation else None
    kv = next((families[name] for name in KV_CACHE_FAMILIES if families.get(name)), None)
    return gpu, (100.0 * sum(kv) / len(kv) if kv else None)


@dataclass
class GpuSampler:
    """Samples the backend's metrics during the measured phase; averages what it found."""

    url: str | None
    gpu: list[float] = field(default_factory=list)
    kv_cache: list[float] = field(default_factory=list)
    last_problem: str | None = None
    samples: int = 0

    async def sample(self, session: aiohttp.ClientSession) -> None:
        if self.url is None:
            return
        text, detail = await scrape(session, self.url)
        self.samples += 1
        if text is None:
            self.last_problem = detail
            return
        gpu, kv = gpu_sample(text)
        if gpu is not None:
            self.gpu.append(gpu)
        if kv is not None:
            self.kv_cache.append(kv)
        if gpu is None and kv is None:
            self.last_problem = (
                f"{self.url} reports neither {DCGM_GPU_UTIL} nor vLLM's KV-cache usage"
            )

    def gpu_utilization(self) -> tuple[float | None, str | None]:
        """(mean utilisation %, None) or (None, why not)."""
        if self.url is None:
            return None, "the endpoint names no backend metrics URL (DCGM exporter or vLLM)"
        if self.gpu:
            return sum(self.gpu) / len(self.gpu), None
        if self.last_problem is not None and not self.kv_cache:
            return None, self.last_problem
        return None, f"{self.url} reports no {DCGM_GPU_UTIL}"

    def kv_cache_usage(self) -> float | None:
        """Mean vLLM KV-cache usage in percent, if the URL reports it."""
        return sum(self.kv_cache) / len(self.kv_cache) if self.kv_cache else None
