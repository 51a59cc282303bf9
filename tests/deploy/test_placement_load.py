"""Placement by measured load: the saga probes vLLM backends' metrics and picks headroom.

Two vLLM stand-ins (see tests/support/llm.py: no GPU here) declare the same capacity; the
one whose scheduler reports a long queue loses. The probe writes what it measured into
each PlntBackend's status, where `kubectl get -o wide` and placement read it.
"""

from __future__ import annotations

from typing import Any

from tests.support.blocking_api import Api
from tests.support.examples import EXAMPLE
from tests.support.llm import threaded_llm
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.stack import Stack
from tests.support.statuses import step_of

CHAT = EXAMPLE.parent / "chat.workflow.yaml"


def vllm_backend(name: str, endpoint: str) -> str:
    capacity = {"maxConcurrency": 16}
    return backend_manifest(
        name,
        "vllm",
        endpoint=endpoint,
        labels={"pool": "gpu"},
        models=["stand-in"],
        capacity=capacity,
    )


def test_the_backend_with_a_long_queue_loses_to_the_one_with_headroom(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref, digest = stack.spec("chat-placed", text=CHAT.read_text())
    with (
        threaded_llm(None, prefix="busy", load=(10, 5)) as busy,
        threaded_llm(None, prefix="calm", load=(3, 0)) as calm,
    ):
        manifests = [vllm_backend("a-busy", busy.url), vllm_backend("b-calm", calm.url)]
        apply(kubectl, namespace, "---\n".join(manifests))
        selection = {"selector": {"matchLabels": {"pool": "gpu"}}}
        apply(kubectl, namespace, workflowrun("placed", ref, digest, backend=selection))
        kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/placed", "--timeout=90s")
        obj = api.get(namespace, "placed")
        answer = api.call(lambda c: c.invoke("placed", {"question": "q"}, namespace=namespace))

    assert obj["status"]["backend"] == "b-calm"
    resolve = step_of(obj, "resolve")
    assert resolve is not None
    assert resolve["message"] == (
        f"backend b-calm: vllm at {calm.url}, model stand-in, headroom 13;"
        " passed over: a-busy (headroom 1)"
    )
    assert answer.body["output"] == "calm: q"
    statuses: dict[str, Any] = {
        item["metadata"]["name"]: item["status"]
        for item in kubectl.json("get", "-n", namespace, "plntbackends")["items"]
    }
    assert (statuses["a-busy"]["inFlight"], statuses["a-busy"]["queueDepth"]) == (10, 5)
    assert (statuses["b-calm"]["inFlight"], statuses["b-calm"]["queueDepth"]) == (3, 0)
    assert all(status["reachable"] is True for status in statuses.values())
    wide = kubectl.run("get", "-n", namespace, "plntbackends", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:6] == ["NAME", "TYPE", "ENDPOINT", "REACHABLE", "IN-FLIGHT", "QUEUE"]
    assert wide[1].split()[:6] == ["a-busy", "vllm", busy.url, "true", "10", "5"]
