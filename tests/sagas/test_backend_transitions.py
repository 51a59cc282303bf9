"""The Events of a PlntBackend's status transitions (`backend_transitions.transitions`).

The table tests pin each transition's type, reason and message; the exhaustive test
walks every pair of statuses over the values that matter (reachable, probeError,
gpuHeadroom, the Probed condition: 81 statuses, 6 561 pairs) and checks each reason
against its rule, stated independently here.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from plnt.sagas.probing import backend_transitions as bt
from plnt.sagas.probing.backend_transitions import Transition, transitions

REFUSED = "GET http://gpu-a:8000/v1/models: Cannot connect to host gpu-a:8000"
BAD_GATEWAY = "GET http://gpu-a:8000/v1/models: HTTP 503"
NO_DCGM = "GET http://gpu-a:9400/metrics: HTTP 404"


def probed(state: str, message: str = "GET …: HTTP 200 in 3 ms") -> list[dict[str, Any]]:
    reason = "Fresh" if state == "True" else "Stale"
    return [{"type": "Probed", "status": state, "reason": reason, "message": message}]


def status(**fields: Any) -> dict[str, Any]:
    """A status as served: None values are left out, as a merge patch removes them."""
    return {key: value for key, value in fields.items() if value is not None}


UP = status(reachable=True, gpuHeadroom=2, conditions=probed("True"))


def test_a_probe_that_changes_nothing_records_no_event() -> None:
    assert transitions(UP, dict(UP)) == []
    assert transitions(None, None) == []
    assert transitions({}, {}) == []


def test_load_and_latency_changes_alone_are_no_transition() -> None:
    busier = {**UP, "inFlight": 9, "queueDepth": 4, "latencyMilliseconds": 250}
    busier |= {"lastProbeTime": "2026-07-01T10:00:00Z", "conditions": probed("True", "other")}
    assert transitions(UP, busier) == []


def test_a_backend_that_stops_answering_is_unreachable_in_the_probes_words() -> None:
    down = status(reachable=False, probeError=REFUSED, conditions=probed("True"))
    assert transitions(UP, down) == [Transition("Warning", "BackendUnreachable", REFUSED)]


def test_the_first_probe_says_reachable_or_unreachable() -> None:
    assert transitions({}, status(reachable=True)) == [
        Transition("Normal", "BackendReachable", "reachable")
    ]
    assert transitions(None, status(reachable=False, probeError=REFUSED)) == [
        Transition("Warning", "BackendUnreachable", REFUSED)
    ]
    assert transitions({}, status(reachable=False)) == [
        Transition("Warning", "BackendUnreachable", "the API did not answer")
    ]


def test_a_backend_answering_again_is_reachable_again_naming_the_old_failure() -> None:
    down = status(reachable=False, probeError=REFUSED)
    assert transitions(down, status(reachable=True)) == [
        Transition("Normal", "BackendReachable", f"reachable again (it was not: {REFUSED})")
    ]
    assert transitions(status(reachable=False), status(reachable=True)) == [
        Transition("Normal", "BackendReachable", "reachable again")
    ]


def test_a_backend_still_down_for_another_reason_is_a_probe_failure() -> None:
    refused = status(reachable=False, probeError=REFUSED)
    failing = status(reachable=False, probeError=BAD_GATEWAY)
    assert transitions(refused, failing) == [Transition("Warning", "ProbeFailed", BAD_GATEWAY)]
    assert transitions(failing, dict(failing)) == []  # the same reason again: nothing


def test_a_reachable_backend_whose_metrics_fail_is_a_probe_failure_and_then_recovers() -> None:
    failing = {**UP, "probeError": NO_DCGM}
    assert transitions(UP, failing) == [Transition("Warning", "ProbeFailed", NO_DCGM)]
    assert transitions(failing, UP) == [
        Transition(
            "Normal",
            "ProbeRecovered",
            f"every request of the probe answered again (it had failed: {NO_DCGM})",
        )
    ]


def test_coming_up_with_the_metrics_still_failing_says_both() -> None:
    down = status(reachable=False, probeError=REFUSED)
    up_without_metrics = status(reachable=True, probeError=NO_DCGM)
    assert [t.reason for t in transitions(down, up_without_metrics)] == [
        "BackendReachable",
        "ProbeFailed",
    ]


def test_headroom_reaching_zero_is_exhausted_and_leaving_it_is_available() -> None:
    full = {**UP, "gpuHeadroom": 0, "kvCacheUsage": 0.95}
    exhausted = "no GPU has room (it had 2); vLLM's KV cache is 95% full"
    assert transitions(UP, full) == [Transition("Warning", "HeadroomExhausted", exhausted)]
    available = "2 GPU(s) with room again"
    assert transitions(full, UP) == [Transition("Normal", "HeadroomAvailable", available)]
    busy = {**UP, "gpuHeadroom": 0}
    assert transitions(status(reachable=True), busy)[-1] == Transition(
        "Warning", "HeadroomExhausted", "no GPU has room"
    )


def test_headroom_becoming_unknown_or_known_with_room_is_no_transition() -> None:
    full = {**UP, "gpuHeadroom": 0}
    unknown = {key: value for key, value in UP.items() if key != "gpuHeadroom"}
    assert transitions(full, unknown) == []
    assert transitions(unknown, UP) == []
    assert transitions(UP, {**UP, "gpuHeadroom": 1}) == []


def test_the_probed_condition_turning_stale_and_fresh_again() -> None:
    message = "last probed 12s ago (stale after 9s)"
    stale = {**UP, "conditions": probed("False", message)}
    assert transitions(UP, stale) == [Transition("Warning", "ProbeStale", message)]
    assert transitions(stale, UP) == [
        Transition("Normal", "ProbeFresh", "probed again: the status is current")
    ]
    assert transitions(stale, {**UP, "conditions": probed("False", "later")}) == []


def test_several_changes_at_once_are_reported_in_the_tables_order() -> None:
    before = {**UP, "conditions": probed("False", "old")}
    after = status(reachable=False, probeError=REFUSED, gpuHeadroom=0, conditions=probed("True"))
    assert [t.reason for t in transitions(before, after)] == [
        "BackendUnreachable",
        "HeadroomExhausted",
        "ProbeFresh",
    ]


# -- every pair of statuses -----------------------------------------------------------

REACHABLE = (None, True, False)
ERRORS = (None, "a", "b")
HEADROOM = (None, 0, 2)
PROBED = (None, "True", "False")
STATES = [
    status(
        reachable=r,
        probeError=e,
        gpuHeadroom=h,
        conditions=probed(p) if p is not None else None,
    )
    for r, e, h, p in itertools.product(REACHABLE, ERRORS, HEADROOM, PROBED)
]


def expected_reasons(old: dict[str, Any], new: dict[str, Any]) -> set[str]:
    """Each reason's rule, stated on its own."""

    def probed_state(s: dict[str, Any]) -> str | None:
        return s["conditions"][0]["status"] if "conditions" in s else None

    reasons = set()
    was, now = old.get("reachable"), new.get("reachable")
    if now is False and was is not False:
        reasons.add("BackendUnreachable")
    if now is True and was is not True:
        reasons.add("BackendReachable")
    if (
        new.get("probeError")
        and new.get("probeError") != old.get("probeError")
        and "BackendUnreachable" not in reasons
    ):
        reasons.add("ProbeFailed")
    if old.get("probeError") and not new.get("probeError") and "BackendReachable" not in reasons:
        reasons.add("ProbeRecovered")
    if new.get("gpuHeadroom") == 0 and old.get("gpuHeadroom") != 0:
        reasons.add("HeadroomExhausted")
    if old.get("gpuHeadroom") == 0 and (new.get("gpuHeadroom") or 0) > 0:
        reasons.add("HeadroomAvailable")
    if probed_state(new) == "False" and probed_state(old) != "False":
        reasons.add("ProbeStale")
    if probed_state(new) == "True" and probed_state(old) == "False":
        reasons.add("ProbeFresh")
    return reasons


WARNINGS = {"BackendUnreachable", "ProbeFailed", "HeadroomExhausted", "ProbeStale"}
NORMALS = {"BackendReachable", "ProbeRecovered", "HeadroomAvailable", "ProbeFresh"}


@pytest.mark.parametrize("old", STATES, ids=lambda s: repr(sorted(s.items()))[:60])
def test_every_pair_of_statuses_records_exactly_the_transitions_its_rules_name(
    old: dict[str, Any],
) -> None:
    for new in STATES:
        found = transitions(old, new)
        reasons = [t.reason for t in found]
        assert len(reasons) == len(set(reasons)), (old, new, found)
        assert set(reasons) == expected_reasons(old, new), (old, new, found)
        for t in found:
            assert t.type == ("Warning" if t.reason in WARNINGS else "Normal"), t
            assert t.message and t.reason[0].isupper() and " " not in t.reason
        if old == new:
            assert found == []
        # A transition and its way back never come out of one change.
        assert not {"BackendUnreachable", "BackendReachable"} <= set(reasons)
        assert not {"ProbeFailed", "ProbeRecovered"} <= set(reasons)


def test_the_reasons_are_the_ones_the_module_names() -> None:
    named = {
        bt.BACKEND_UNREACHABLE, bt.BACKEND_REACHABLE, bt.PROBE_FAILED, bt.PROBE_RECOVERED,
        bt.HEADROOM_EXHAUSTED, bt.HEADROOM_AVAILABLE, bt.PROBE_STALE, bt.PROBE_FRESH,
    }  # fmt: skip
    assert named == WARNINGS | NORMALS
    seen = {t.reason for old in STATES for new in STATES for t in transitions(old, new)}
    assert seen == named  # every reason is reachable
