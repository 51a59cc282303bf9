"""`spec.fallback` end to end, and the primary's breaker in its PlntBackend's status.

Two LLM stand-ins (tests/support/llm.py) play a primary model server and a smaller one; a
run names the first as its backend and the second as its fallback. While the primary is
down, the runner's breaker for it opens after its consecutive failures and the answers
come from the fallback, marked; the probing worker (every 0.2 s) shows the breaker in the
primary's status with a BreakerOpened Event. When the primary serves again on its port,
the breaker's probe call closes it: answers come from the primary again, and the status
and a BreakerClosed Event say so.
"""

from __future__ import annotations

from typing import Any

from yarl import URL

from plnt.client import errors as client_errors
from plnt.client.clients import InvokeResult
from tests.support.backends import backend_events, status_of
from tests.support.blocking_api import Api
from tests.support.examples import EXAMPLE
from tests.support.llm import threaded_llm
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.stack import Stack, WorkerProcess

CHAT = EXAMPLE.parent / "chat.workflow.yaml"


def ask(api: Api, namespace: str, question: str) -> InvokeResult | None:
    """The run's answer, or None when the call failed (the primary down, breaker closed)."""
    try:
        return api.invoke(namespace, "guarded", {"question": question})
    except client_errors.ClientError:
        return None


def breaker_of(kubectl: Kubectl, namespace: str) -> dict[str, Any]:
    breaker: dict[str, Any] = status_of(kubectl, namespace, "big").get("breaker") or {}
    return breaker


def test_answers_come_from_the_fallback_marked_while_the_primary_is_down_and_its_breaker_shows(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str, probing_worker: WorkerProcess
) -> None:
    ref, digest = stack.spec("chat-fallback", text=CHAT.read_text())
    with threaded_llm(None, prefix="small") as small:
        with threaded_llm(None, prefix="big") as big:
            port = URL(big.url).port
            apply(
                kubectl,
                namespace,
                backend_manifest("big", "openai", endpoint=big.url, models=["stand-in"]),
            )
            apply(
                kubectl,
                namespace,
                backend_manifest("small", "openai", endpoint=small.url, models=["stand-in"]),
            )
            run = workflowrun(
                "guarded", ref, digest, backend={"name": "big"}, fallback={"name": "small"}
            )
            apply(kubectl, namespace, run)
            kubectl.run(
                "wait", "-n", namespace, "--for=condition=Ready", "wfr/guarded", "--timeout=90s"
            )
            first = ask(api, namespace, "who answers?")
            assert first is not None and first.output == "big: who answers?"
            assert "fallback" not in first.body
            wait_for(
                lambda: breaker_of(kubectl, namespace).get("state") == "closed",
                timeout=30,
                interval=0.3,
                message="the primary's breaker reported closed",
            )
        # The primary is down: its failures open the breaker, then the fallback answers.
        answers: list[InvokeResult | None] = []

        def fallback_answers() -> bool:
            answers.append(ask(api, namespace, f"q{len(answers)}"))
            last = answers[-1]
            return last is not None and last.body.get("fallback") == "small"

        wait_for(fallback_answers, timeout=60, interval=0.1, message="an answer from the fallback")
        last = answers[-1]
        assert last is not None and last.output == f"small: q{len(answers) - 1}"
        assert all(a is None for a in answers[:-1])  # before: failures, never a wrong answer
        assert len(answers) <= 12  # the breaker opened after a few failures, not at random
        assert small.requests  # the fallback was really called

        opened = wait_for(
            lambda: (b := breaker_of(kubectl, namespace)).get("state") == "open" and b,
            timeout=30,
            interval=0.3,
            message="status.breaker open",
        )
        assert opened["open"] == opened["runners"] == 1
        assert "consecutive failures" in opened["openedBy"]
        wait_for(
            lambda: ("Warning", "BreakerOpened", 1) in backend_events(kubectl, namespace, "big"),
            timeout=30,
            interval=0.3,
            message="a BreakerOpened Event",
        )

        # The primary serves again where it was: the breaker's probe call closes it.
        with threaded_llm(None, prefix="big", port=port):
            primary: list[InvokeResult | None] = []

            def primary_answers() -> bool:
                primary.append(ask(api, namespace, "back?"))
                answer = primary[-1]
                return answer is not None and "fallback" not in answer.body

            wait_for(primary_answers, timeout=60, interval=0.3, message="the primary again")
            assert primary[-1] is not None and primary[-1].output == "big: back?"
            wait_for(
                lambda: breaker_of(kubectl, namespace).get("state") == "closed",
                timeout=30,
                interval=0.3,
                message="status.breaker closed",
            )
            wait_for(
                lambda: ("Normal", "BreakerClosed", 1) in backend_events(kubectl, namespace, "big"),
                timeout=30,
                interval=0.3,
                message="a BreakerClosed Event",
            )
