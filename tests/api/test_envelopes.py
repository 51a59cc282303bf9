"""The invoke envelope as written (`plnt.api.envelopes`) is what `InvokeRequest` reads."""

from __future__ import annotations

from plnt.api.envelopes import invoke_envelope
from plnt.api.invocations import InvokeRequest
from plnt.api.runs import RunKey, RunRef
from plnt.sagas import values


def test_the_plain_envelope_is_just_the_inputs() -> None:
    assert invoke_envelope({"topic": "etcd"}) == {"inputs": {"topic": "etcd"}}


def test_a_resuming_envelope_parses_with_its_completed_steps_and_step_outputs() -> None:
    body = invoke_envelope({"q": 1}, completed_steps={"pros": "yes"}, step_outputs=True)
    parsed = InvokeRequest.parse(body)
    assert parsed.inputs == {"q": 1}
    assert parsed.step_outputs is True
    assert parsed.completed_steps is not None
    assert parsed.completed_steps["pros"].output == "yes"


def test_the_sagas_run_reference_is_the_apis_and_keys_runs_by_name() -> None:
    assert values.RunRef is RunRef
    run = RunRef("ns", "run", "uid-1")
    assert (
        run.key
        == RunKey("ns", "run")
        == RunKey.of({"metadata": {"namespace": "ns", "name": "run"}})
    )
