"""The shadower's sampling, its bounded queue and the shadow log, without I/O."""

from __future__ import annotations

import random

from plnt.apiserver.workflowruns import shadowing


def window(percent: int = 100, queue: int = 2, revision: int = 2) -> shadowing.Window:
    return shadowing.Window(
        revision=revision, endpoints=("http://c",), percent=percent, queue_size=queue
    )


def mirror(name: str = "r", w: shadowing.Window | None = None) -> shadowing.Mirror:
    return shadowing.Mirror(
        namespace="ns",
        name=name,
        window=w or window(),
        body=b'{"inputs": {}}',
        stable_revision=1,
        stable_ms=1.0,
    )


def test_the_window_is_read_from_the_canary_traffic_entry() -> None:
    status = {
        "traffic": [
            {"revision": 1, "weight": 100, "endpoints": ["http://s/"]},
            {
                "revision": 2,
                "weight": 0,
                "endpoints": ["http://c/"],
                "shadow": {"percent": 30, "queueSize": 5},
            },
        ]
    }
    assert shadowing.window_of(status) == shadowing.Window(2, ("http://c",), 30, 5)
    assert shadowing.window_of({"traffic": [{"revision": 1, "endpoints": ["http://s"]}]}) is None
    no_endpoints = {"traffic": [{"revision": 2, "shadow": {"percent": 30}}]}
    assert shadowing.window_of(no_endpoints) is None
    assert shadowing.window_of(None) is None


def test_sampling_takes_about_the_stated_share_and_all_at_100_percent() -> None:
    shadower = shadowing.Shadower(rng=random.Random(7))
    taken = sum(shadower.sampled(window(percent=25)) for _ in range(4000))
    assert 800 < taken < 1200
    assert all(shadower.sampled(window(percent=100)) for _ in range(100))


def test_a_run_holding_queue_size_calls_has_the_next_dropped_and_counted() -> None:
    drops: list[int] = []
    shadower = shadowing.Shadower(on_drop=lambda: drops.append(1))
    first, second, third = mirror(), mirror(), mirror()
    assert shadower.offer(first) and shadower.offer(second)
    assert not shadower.offer(third)
    assert shadower.offer(mirror("other"))  # the bound is per run
    assert (len(drops), shadower.log.dropped("ns", "r", 2), shadower.log.dropped("ns", "r")) == (
        1,
        1,
        1,
    )
    assert shadower.queue.qsize() == 3
    shadower.done(first)  # sent: room for one more
    assert shadower.offer(mirror())
    assert shadower.log.dropped("ns", "r", 3) == 0


def test_the_log_keeps_the_last_pairs_per_run_and_filters_by_canary_revision() -> None:
    log = shadowing.ShadowLog(size=3)
    for n, revision in enumerate([2, 2, 3, 3]):
        log.record("ns", "r", {"id": str(n), "canary": {"revision": revision}})
    assert [p["id"] for p in log.pairs("ns", "r")] == ["1", "2", "3"]
    assert [p["id"] for p in log.pairs("ns", "r", 3)] == ["2", "3"]
    assert log.pairs("ns", "other") == []
