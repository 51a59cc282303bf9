"""Placement within a pool: a run that asks for a pool is placed only on its backends.

Two vLLM stand-ins (tests/support/llm.py: no GPU here) match the run's selector; the
one in another pool is idle, the one in the asked-for pool busy, and the run still lands
in its pool. The pool is read from the run's `spec.backend.pool`.
"""

from __future__ import annotations

from tests.support.blocking_api import Api
from tests.support.examples import EXAMPLE
from tests.support.llm import threaded_llm
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.stack import Stack
from tests.support.statuses import step_of

CHAT = EXAMPLE.parent / "chat.workflow.yaml"


def test_a_run_asking_for_a_pool_is_placed_in_it_even_when_another_pool_has_more_room(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    ref, digest = stack.spec("chat-pooled", text=CHAT.read_text())
    with (
        threaded_llm(None, prefix="batch", load=(0, 0)) as batch,
        threaded_llm(None, prefix="interactive", load=(12, 0)) as interactive,
    ):
        common = {"labels": {"tier": "gpu"}, "models": ["stand-in"]}
        manifests = [
            backend_manifest("a-batch", "vllm", endpoint=batch.url, pool="batch", **common),
            backend_manifest(
                "b-interactive", "vllm", endpoint=interactive.url, pool="interactive", **common
            ),
        ]
        apply(kubectl, namespace, "---\n".join(manifests))
        selection = {"selector": {"matchLabels": {"tier": "gpu"}}, "pool": "interactive"}
        apply(kubectl, namespace, workflowrun("pooled", ref, digest, backend=selection))
        kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/pooled", "--timeout=90s")
        obj = api.get(namespace, "pooled")
        answer = api.invoke(namespace, "pooled", {"question": "q"})

    assert obj["spec"]["backend"]["pool"] == "interactive"
    assert obj["status"]["backend"] == "b-interactive"
    resolve = step_of(obj, "resolve")
    assert resolve is not None and resolve["message"].startswith(
        f"backend b-interactive: vllm at {interactive.url}, model stand-in, headroom 4"
    )
    assert answer.body["output"] == "interactive: q"
