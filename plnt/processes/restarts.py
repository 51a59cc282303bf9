"""`plnt_child_restarts_total{child}`: how often the supervised children were restarted.

Registered into the API server's metrics registry by the process that supervises
children (`plnt up`: etcd, Temporal, the model server and the sibling API processes;
`plnt serve --workers N`: the workers), and read at each scrape.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from plnt.processes.supervision import Supervisor


class ChildRestarts(Collector):
    """`plnt_child_restarts_total{child}`: the supervisors' restart counts, read when
    the server's metrics are scraped (registered into the API server's registry)."""

    def __init__(self, supervisors: Sequence[Supervisor]) -> None:
        self._supervisors = supervisors

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "plnt_child_restarts",
            "Restarts of a child process plnt supervises (etcd, temporal, model, "
            "apiserver-worker).",
            labels=["child"],
        )
        counts: dict[str, int] = {}  # the N-1 sibling API processes count as one child
        for supervisor in self._supervisors:
            counts[supervisor.what] = counts.get(supervisor.what, 0) + supervisor.restarts
        for what, restarts in counts.items():
            family.add_metric([what], restarts)
        yield family
