"""`kind: workflow` steps in the runner: the revision's bundle, the call with its own
inputs, its output and nested trace, and the errors that name the step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from plnt.runner import settings
from plnt.workflowspec import bundles, documents
from tests.support.runners import StartRunner, budgeted_down_backend, counter_sum, invoke
from tests.support.subworkflows import caller, child, digest_of

ECHO = settings.BackendConfig(type="echo")


def bundle_file(tmp_path: Path, top: str, *called: str) -> Path:
    path = tmp_path / "bundle.json"
    path.write_bytes(bundles.pack(top.encode(), {digest_of(c): c.encode() for c in called}))
    return path


async def test_a_workflow_step_runs_the_called_workflow_and_nests_its_trace(
    start_runner: StartRunner, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    leaf = child()
    top = caller("oci-layout:lib:shout", digest_of(leaf))
    url = await start_runner(bundle_file(tmp_path, top, leaf), backend=ECHO)
    status, body = await invoke(session, url, {"topic": "etcd"})
    assert status == 200, body
    assert body["output"] == {"called": "SHOUT ETCD!", "topic": "etcd"}
    call = next(step for step in body["trace"] if step["id"] == "call")
    assert call["kind"] == "workflow"
    called = [(step["id"], step["kind"]) for step in call["steps"]]
    assert called == [("say", "model"), ("loud", "transform")]
    assert call["steps"][0]["finishedMs"] >= call["steps"][0]["startedMs"]


async def test_inputs_the_called_workflow_refuses_fail_the_step_naming_them(
    start_runner: StartRunner, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    leaf = child()
    top = caller("oci-layout:lib:shout", digest_of(leaf)).replace(
        "word: steps.prepare.output", 'word: "42"'
    )
    url = await start_runner(bundle_file(tmp_path, top, leaf), backend=ECHO)
    status, body = await invoke(session, url, {"topic": "etcd"})
    assert status == 500, body
    message = body["error"]["message"]
    assert "step 'call'" in message and "workflow 'shout'" in message
    assert "$.word" in message and "is not of type 'string'" in message


async def test_a_runner_refuses_to_start_when_its_bundle_lacks_a_called_digest(
    start_runner: StartRunner, write_spec: Callable[[str], Path]
) -> None:
    missing = "sha256:" + "1" * 64
    with pytest.raises(documents.SpecError) as refused:
        await start_runner(write_spec(caller("oci-layout:lib:shout", missing)), backend=ECHO)
    assert f"steps[1](id=call).digest: {missing} is not in the revision's bundle" in str(
        refused.value
    )


async def test_a_bundle_whose_entry_is_not_its_digest_is_refused(
    start_runner: StartRunner, tmp_path: Path
) -> None:
    leaf = child()
    path = bundle_file(tmp_path, caller("oci-layout:lib:shout", digest_of(leaf)), leaf)
    path.write_text(path.read_text().replace("shout {{", "whisper {{"))
    with pytest.raises(documents.SpecError) as refused:
        await start_runner(path, backend=ECHO)
    assert f"<bundle>.workflows[{digest_of(leaf)}]: the text is sha256:" in str(refused.value)


def test_a_spec_that_calls_nothing_travels_as_its_own_bytes() -> None:
    leaf = child().encode()
    assert bundles.pack(leaf, {}) == leaf
    assert bundles.unpack(leaf).spec == leaf


async def test_a_called_workflow_answered_by_the_fallback_marks_the_answer_and_is_not_cached(
    start_runner: StartRunner, session: aiohttp.ClientSession, tmp_path: Path, closed_port: int
) -> None:
    backend = settings.BackendConfig(
        type="openai",
        endpoint=f"http://127.0.0.1:{closed_port}/v1",
        model="m",
        name="primary",
        breaker_failures=1,
        breaker_open_seconds=60,
        fallback=settings.BackendConfig(type="echo", name="small"),
    )
    leaf = child()
    top = caller("oci-layout:lib:shout", digest_of(leaf))
    url = await start_runner(bundle_file(tmp_path, top, leaf), backend=backend)
    await invoke(session, url, {"topic": "etcd"})  # opens the primary's breaker
    for _ in range(2):
        status, body = await invoke(session, url, {"topic": "etcd"})
        assert status == 200, body
        assert body["output"]["called"] == "SHOUT ETCD!" and body["fallback"] == "small"
        call = next(step for step in body["trace"] if step["id"] == "call")
        assert call["cache"] != "hit" and call["steps"][0]["cache"] != "hit"


async def test_a_called_workflows_retries_spend_the_callers_backend_retry_budget(
    start_runner: StartRunner, session: aiohttp.ClientSession, tmp_path: Path, closed_port: int
) -> None:
    backend = budgeted_down_backend(closed_port)
    leaf = child().replace(
        'prompt: "shout {{ inputs.word }}"',
        'prompt: "shout {{ inputs.word }}"\n    retries: 5\n    cache: false',
    )
    top = caller("oci-layout:lib:shout", digest_of(leaf))
    url = await start_runner(bundle_file(tmp_path, top, leaf), backend=backend)
    for _ in range(3):
        status, body = await invoke(session, url, {"topic": "etcd"})
        assert status == 502, body
    # Three calls of six attempts each would be 18 backend calls; the called workflow's
    # step draws on the same budget as the caller's own steps, which allows 2 retries.
    assert await counter_sum(session, url, "plnt_runner_backend_calls_total") == 5
    refused = 'plnt_runner_backend_retries_total{backend="down",outcome="refused"}'
    assert await counter_sum(session, url, refused) == 3
