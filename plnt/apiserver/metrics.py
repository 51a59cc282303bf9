"""Prometheus metrics of the API server, in a registry of its own (no process globals).

The etcd latency histogram is fed by the etcd store's `observe` callback, so it
measures etcd round trips, never the watch cache's memory reads. The max-in-flight
figures are read from the limiter when scraped, so serving a request costs no metric
update for them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from plnt.apiserver.inflight import InFlightLimiter, RequestKind

WORKER_LABEL = "worker"
"""The label a server of several workers adds to every sample (`merged_exposition`)."""

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class InFlightCollector(Collector):
    """kube's `apiserver_current_inflight_requests` and `apiserver_dropped_requests_total`
    (by `request_kind`), plus the long-running requests being served, from the limiter."""

    def __init__(self, limiter: InFlightLimiter) -> None:
        self._limiter = limiter

    def collect(self) -> Iterator[Metric]:
        current = GaugeMetricFamily(
            "plnt_apiserver_current_inflight_requests",
            "Requests holding a max-in-flight slot now, by kind (readOnly, mutating).",
            labels=["request_kind"],
        )
        limits = GaugeMetricFamily(
            "plnt_apiserver_inflight_limit",
            "The max-in-flight limit of each kind (0: no limit).",
            labels=["request_kind"],
        )
        dropped = CounterMetricFamily(
            "plnt_apiserver_dropped_requests",
            "Requests refused with 429 because their kind's in-flight limit was reached.",
            labels=["request_kind"],
        )
        for kind in RequestKind:
            current.add_metric([kind.value], self._limiter.in_flight(kind))
            limits.add_metric([kind.value], self._limiter.limit(kind))
            dropped.add_metric([kind.value], self._limiter.rejected(kind))
        yield current
        yield limits
        yield dropped
        yield GaugeMetricFamily(
            "plnt_apiserver_longrunning_requests",
            "Long-running requests (watches, proxies, streams) being served now.",
            value=self._limiter.long_running,
        )


class Metrics:
    """The server's metric families.

    Request metrics follow kube-apiserver's `apiserver_request_total` and
    `apiserver_request_duration_seconds`: labelled by verb (kube's request verbs: get,
    list, watch, create, update, patch, delete, deletecollection), API group, resource,
    subresource and, for the counter, HTTP code. A non-resource request (discovery,
    /metrics, /healthz) has an empty resource. A kind registers its own families in
    `registry` when it is installed (its `KindInstall.setup`), so these name no kind.
    """

    def __init__(self, *, in_flight: InFlightLimiter | None = None) -> None:
        self._children: dict[tuple[str, str, str, str, int], tuple[Any, Any]] = {}
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "plnt_apiserver_requests",
            "Requests by verb, API group, resource, subresource and HTTP code.",
            ["verb", "group", "resource", "subresource", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "plnt_apiserver_request_duration_seconds",
            "Request latency in seconds by verb, API group, resource and subresource, from "
            "the request's arrival to its answer (watches excluded: they last as long as "
            "the client stays).",
            ["verb", "group", "resource", "subresource"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.open_watches = Gauge(
            "plnt_apiserver_open_watches",
            "Watches streaming now, by resource.",
            ["resource"],
            registry=self.registry,
        )
        self.etcd_latency = Histogram(
            "plnt_etcd_request_duration_seconds",
            "etcd round-trip latency in seconds by operation (range, put, txn, delete ...); "
            "reads served by the watch cache never reach etcd and are not counted.",
            ["operation"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        if in_flight is not None:
            self.registry.register(InFlightCollector(in_flight))

    def observe_request(
        self,
        verb: str,
        code: int,
        seconds: float | None,
        *,
        group: str = "",
        resource: str = "",
        subresource: str = "",
    ) -> None:
        """Count one request; `seconds` is None for watches (they last as long as they last).

        Label children are looked up once per label set: `labels()` showed in profiles.
        """
        key = (verb, group, resource, subresource, code)
        children = self._children.get(key)
        if children is None:
            children = (
                self.requests.labels(verb, group, resource, subresource, str(code)),
                self.latency.labels(verb, group, resource, subresource),
            )
            self._children[key] = children
        children[0].inc()
        if seconds is not None:
            children[1].observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def observe_etcd(self, rpc: str, seconds: float) -> None:
        """The etcd store's `observe` callback."""
        self.etcd_latency.labels(rpc).observe(seconds)


class _Families(Collector):
    """Already-built families, for the library's exposition to write."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def families_of(registry: CollectorRegistry) -> list[list[Any]]:
    """What `registry` holds now, as JSON values (`[name, help, type, unit, samples]`, a
    sample `[name, labels, value]`): what a worker hands the sibling that answers a scrape.

    Structured, not the text format: the library's text parser costs about four times the
    exposition per worker, and these come from the library's own collected families."""
    return [
        [
            family.name,
            family.documentation,
            family.type,
            family.unit,
            [[sample.name, sample.labels, sample.value] for sample in family.samples],
        ]
        for family in registry.collect()
    ]


def worker_families(data: Any, index: int) -> list[Metric]:
    """One worker's `families_of`, every sample labelled `worker="<index>"`. Raises
    ValueError for data of another shape."""
    worker = str(index)
    families: list[Metric] = []
    try:
        for name, documentation, kind, unit, samples in data:
            family = Metric(name, documentation, kind, unit)
            family.samples = [
                Sample(sample, {**labels, WORKER_LABEL: worker}, float(value))
                for sample, labels, value in samples
            ]
            families.append(family)
    except (TypeError, ValueError) as error:
        raise ValueError(f"not a worker's metric families: {error}") from error
    return families


def merged_exposition(workers: Sequence[list[Metric]]) -> bytes:
    """One exposition of several workers' families (`worker_families`): one series set
    per worker, so PromQL sums them (`sum without (worker)`) and a restarted worker's
    counters reset on their own series. Written with the library's exposition, so a
    family's HELP and TYPE appear once (the first worker's that has it)."""
    families: dict[str, Metric] = {}
    for worker in workers:
        for family in worker:
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
            merged.samples.extend(family.samples)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(families.values())))
    return generate_latest(registry)
