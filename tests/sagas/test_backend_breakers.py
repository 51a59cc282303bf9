"""A PlntBackend's breaker in its status: the runners' reports aggregated
(`backend_breakers.aggregate`) and the Events of its changes (`backend_transitions`)."""

from __future__ import annotations

from typing import Any

from plnt.api.breakers import BreakerState
from plnt.sagas.probing import backend_breakers
from plnt.sagas.probing import backend_transitions as bt

OPENED = "5 consecutive failures, the last: cannot connect"


def report(state: Any, since: str, *, backend: str = "llama", reason: str | None = None) -> Any:
    return BreakerState(backend=backend, state=state, since=since, reason=reason)


def test_one_open_runner_makes_the_backend_open_naming_the_earliest_reason() -> None:
    found = backend_breakers.aggregate(
        "llama",
        [
            report("closed", "2026-01-01T00:00:00Z"),
            report("open", "2026-01-01T00:00:09Z", reason="later"),
            report("open", "2026-01-01T00:00:05Z", reason=OPENED),
            report("open", "2026-01-01T00:00:01Z", backend="small", reason="not this one"),
        ],
    )
    assert found is not None
    assert found.to_wire() == {
        "state": "open",
        "since": "2026-01-01T00:00:05Z",
        "openedBy": OPENED,
        "runners": 3,
        "open": 2,
    }


def test_a_probing_runner_makes_the_backend_half_open_and_all_closed_is_closed() -> None:
    probing = backend_breakers.aggregate(
        "llama",
        [report("closed", "2026-01-01T00:00:00Z"), report("half_open", "2026-01-01T00:00:07Z")],
    )
    assert probing is not None and (probing.state, probing.since) == (
        "half_open",
        "2026-01-01T00:00:07Z",
    )
    closed = backend_breakers.aggregate("llama", [report("closed", "2026-01-01T00:00:03Z")])
    assert closed is not None and (closed.state, closed.open, closed.opened_by) == (
        "closed",
        0,
        None,
    )


def test_no_runner_reporting_the_backend_leaves_no_breaker() -> None:
    assert backend_breakers.aggregate("llama", [report("open", "x", backend="other")]) is None
    assert backend_breakers.aggregate("llama", []) is None


def test_runner_endpoints_are_the_runs_ready_replicas_each_once() -> None:
    runs = [
        {"status": {"traffic": [{"endpoints": ["http://a:1/", "http://b:2"]}]}},
        {"status": {"traffic": [{"endpoints": ["http://a:1"]}, {"endpoints": []}]}},
        {"status": {}},
        {},
    ]
    assert backend_breakers.runner_endpoints(runs) == ["http://a:1", "http://b:2"]


def breaker(state: str, **more: Any) -> dict[str, Any]:
    return {"breaker": {"state": state, "since": "2026-01-01T00:00:00Z", "runners": 2, **more}}


def test_a_breaker_opening_is_a_warning_naming_the_runners_and_why() -> None:
    (event,) = bt.transitions(breaker("closed"), breaker("open", open=1, openedBy=OPENED))
    assert (event.type, event.reason) == (bt.WARNING, bt.BREAKER_OPENED)
    assert event.message == f"1 of 2 runner(s) stopped sending it calls: {OPENED}"
    assert [t.reason for t in bt.transitions({}, breaker("open"))] == [bt.BREAKER_OPENED]
    assert [t.reason for t in bt.transitions(breaker("half_open"), breaker("open"))] == [
        bt.BREAKER_OPENED
    ]


def test_a_breaker_closing_after_open_or_half_open_is_normal_and_nothing_else_is_an_event() -> None:
    for before in ("open", "half_open"):
        (event,) = bt.transitions(breaker(before), breaker("closed"))
        assert (event.type, event.reason) == (bt.NORMAL, bt.BREAKER_CLOSED)
    assert bt.transitions(breaker("open"), breaker("open")) == []
    assert bt.transitions(breaker("closed"), breaker("closed")) == []
    assert bt.transitions({}, breaker("closed")) == []
    assert bt.transitions(breaker("open"), breaker("half_open")) == []
    assert bt.transitions(breaker("open"), {}) == []  # no runner reports: nothing is known
