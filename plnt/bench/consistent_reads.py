"""The `reads` phase: what consistent reads from the watch cache cost, in one run.

Why a phase of its own: a consistent read (resourceVersion "") costs one etcd
round trip (etcd's current revision) plus a wait for the cache, where a
resourceVersion "0" read answers from memory at once. The phase measures, on the
preloaded objects and at the run's concurrency:

* storage GET and full paged LIST through a `CachedStore` in this process, with
  `consistent=True` and `consistent=False`, against raw etcd (`EtcdStore`) — the
  storage cost alone, with nothing else in the way;
* the API's full paged LIST over HTTPS with resourceVersion "" and "0" (the API's
  GET handler does not pass resourceVersion down, so its GETs are all consistent).

Results go to `Results.reads`, keyed by the names in `READ_MODES`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import aiohttp

from plnt.bench import apiserver as harness
from plnt.storage.cache import CachedStore
from plnt.storage.etcd import EtcdStore

READ_MODES = (
    "GET etcd",
    "GET cache consistent",
    "GET cache rv=0",
    "LIST etcd",
    "LIST cache consistent",
    "LIST cache rv=0",
    "LIST api consistent",
    "LIST api rv=0",
)

Measure = Callable[..., Awaitable[harness.PhaseStats]]


def cached_get(
    store: CachedStore, keys: Sequence[str], *, consistent: bool
) -> Callable[[int], Awaitable[bool]]:
    async def operation(seq: int) -> bool:
        try:
            await store.get(keys[(seq * 7919) % len(keys)], consistent=consistent)
        except Exception:
            return False
        return True

    return operation


def cached_list(
    store: CachedStore, prefix: str, *, page: int, consistent: bool
) -> Callable[[int], Awaitable[bool]]:
    """One operation is a full paged list (the first page decides the revision)."""

    async def operation(seq: int) -> bool:
        del seq
        try:
            result = await store.list(prefix, limit=page, consistent=consistent)
            while result.continue_token is not None:
                result = await store.list(prefix, limit=page, continue_token=result.continue_token)
        except Exception:
            return False
        return True

    return operation


async def measure_reads(
    *,
    endpoint: str,
    raw: EtcdStore,
    session: aiohttp.ClientSession,
    list_url: str,
    prefix: str,
    objects: int,
    page: int,
    measure: Measure,
    list_concurrency: int,
) -> dict[str, harness.PhaseStats]:
    """Every mode of `READ_MODES`, GETs at the run's concurrency, LISTs at `list_concurrency`."""
    keys = [f"{prefix}obj-{i:06d}" for i in range(objects)]
    out: dict[str, harness.PhaseStats] = {}
    async with (
        EtcdStore(endpoint, key_prefix="/registry") as etcd,
        CachedStore(etcd, prefixes=["/plnt.work/workflowruns/"]) as cache,
    ):
        out["GET etcd"] = await measure(harness.raw_get(raw, keys))
        out["GET cache consistent"] = await measure(cached_get(cache, keys, consistent=True))
        out["GET cache rv=0"] = await measure(cached_get(cache, keys, consistent=False))
        lists = {"concurrency": list_concurrency}
        out["LIST etcd"] = await measure(harness.raw_list(raw, prefix, page=page), **lists)
        for name, consistent in (("consistent", True), ("rv=0", False)):
            out[f"LIST cache {name}"] = await measure(
                cached_list(cache, prefix, page=page, consistent=consistent), **lists
            )
    for name, version in (("rv=0", "0"), ("consistent", "")):
        out[f"LIST api {name}"] = await measure(
            harness.http_list(
                session, list_url, page=page, expect=objects, resource_version=version
            ),
            **lists,
        )
    return out


def report_lines(reads: dict[str, harness.PhaseStats]) -> list[str]:
    """A row per mode, then the ratios: consistent / rv=0 and each against etcd."""
    lines = [f"{'reads':<24}{'rate':>12}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}"]
    for name in READ_MODES:
        stats = reads.get(name)
        if stats is not None:
            lines.append(
                f"{name:<24}{stats.rate:>12.1f}{stats.percentile_ms(0.5):>10.2f}"
                f"{stats.percentile_ms(0.99):>10.2f}{stats.errors:>8}"
            )

    def ratio(a: str, b: str) -> str:
        x, y = reads.get(a), reads.get(b)
        return f"{x.rate / y.rate:6.2f}" if x and y and y.rate else "   n/a"

    for verb in ("GET", "LIST"):
        consistent, stale, etcd = (f"{verb} cache consistent", f"{verb} cache rv=0", f"{verb} etcd")
        lines.append(
            f"ratio {verb} cache consistent/rv=0 {ratio(consistent, stale)}"
            f"  consistent/etcd {ratio(consistent, etcd)}  rv=0/etcd {ratio(stale, etcd)}"
        )
    lines.append(f"ratio LIST api consistent/rv=0 {ratio('LIST api consistent', 'LIST api rv=0')}")
    return lines
