"""Backend credentials end to end: a PlntBackend's credentialsRef reaches the model server.

Standalone, Secret NAME key KEY is the file STATE/secrets/NAME/KEY. The run waits
(CredentialsMissing, retried) until the file exists, then deploys; the key travels from
the file to the runner to the backend and through nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.blocking_api import Api
from tests.support.examples import EXAMPLE
from tests.support.llm import threaded_llm
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import Kubectl
from tests.support.stack import Stack
from tests.support.statuses import condition_of

CHAT = EXAMPLE.parent / "chat.workflow.yaml"


def waiting_for_credentials(obj: dict[str, Any]) -> bool:
    ready = condition_of(obj, "Ready")
    return ready is not None and ready["reason"] == "CredentialsMissing"


def test_a_run_waits_for_its_backend_secret_then_calls_the_backend_with_the_key(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    secret = f"{namespace}-llm"
    secret_file = stack.state_dir / "secrets" / secret / "token"
    ref, digest = stack.spec("chat-keyed", text=CHAT.read_text())
    with threaded_llm("sk-e2e-42") as llm:
        apply(
            kubectl,
            namespace,
            backend_manifest(
                "keyed",
                "openai",
                endpoint=llm.url,
                models=["stand-in"],
                credentialsRef={"name": secret, "key": "token"},
            ),
        )
        run = workflowrun("keyed", ref, digest, backend={"name": "keyed"})
        apply(kubectl, namespace, run)

        waiting = api.wait(
            namespace, "keyed", waiting_for_credentials, message="Ready=False CredentialsMissing"
        )
        ready = condition_of(waiting, "Ready")
        assert ready is not None and ready["status"] == "False"
        assert f"no secret file {secret_file}" in ready["message"]
        assert "retrying in 10 s" in ready["message"]
        assert "Bearer sk-e2e-42" not in llm.seen

        write_secret(secret_file, "sk-e2e-42\n")
        kubectl.run("wait", "-n", namespace, "--for=condition=Ready", "wfr/keyed", "--timeout=90s")
        answer = api.call(
            lambda c: c.invoke("keyed", {"question": "who holds the key?"}, namespace=namespace)
        )
        assert answer.body["output"] == "stand-in: who holds the key?"
        assert "Bearer sk-e2e-42" in llm.seen

    obj = api.get(namespace, "keyed")
    assert obj["status"]["backend"] == "keyed"
    described = kubectl.run("describe", "-n", namespace, "wfr/keyed").stdout
    assert "CredentialsMissing" in described
    assert "sk-e2e-42" not in described


def write_secret(path: Path, value: str) -> None:
    """What a user does standalone in place of `kubectl create secret generic`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value)
    path.chmod(0o600)
