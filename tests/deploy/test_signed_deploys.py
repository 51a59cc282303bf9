"""Signed specs end to end: `plnt up` and its worker require signatures in every namespace
(`--trusted-signer release=PEM --require-signatures '*'`); real kubectl, Temporal, runners.

A run that names no trusted signer is refused at admission; a spec signed by another key
fails the deploy for good with nothing installed; a spec signed by the trusted key deploys
and the signer shows in `plnt history` and `kubectl describe`.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from plnt.processes.temporal import TemporalDevServer
from plnt.workflowspec import signing, sources
from tests.support.examples import EXAMPLE
from tests.support.manifests import apply
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.signing import KeyPair, Keys
from tests.support.stack import Stack, WorkerProcess, runner_pids, running_stack
from tests.support.statuses import condition_of


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return Keys(tmp_path_factory.mktemp("keys")).key_pair("release")


@pytest.fixture(scope="module")
def stack(
    temporal: TemporalDevServer, tmp_path_factory: pytest.TempPathFactory, release: KeyPair
) -> Iterator[Stack]:
    policy = ("--trusted-signer", f"release={release.public}", "--require-signatures", "*")
    with running_stack(temporal, tmp_path_factory.mktemp("plnt-signed"), *policy) as built:
        # The stack's worker runs without the policy: replace it with one that has it.
        built.worker.stop()
        built.worker = WorkerProcess(
            temporal.address,
            built.server.kubeconfig,
            built.state_dir,
            extra_args=("--probe-interval", "0", *policy),
        ).start()
        yield built


def _signed_spec(stack: Stack, tag: str, key: Path) -> tuple[str, str]:
    data = EXAMPLE.read_bytes().replace(b"version: 1.0.0", f"version: 1.0.0-{tag}".encode())
    ref = f"oci-layout:{stack.layout}:{tag}"
    pinned = asyncio.run(sources.publish(data, ref, signature=signing.sign(data, key=key)))
    return ref, str(pinned.digest)


def _run(name: str, ref: str, digest: str, verify: dict[str, str] | None) -> str:
    workflow: dict[str, object] = {"ref": ref, "digest": digest}
    if verify is not None:
        workflow["verify"] = verify
    return yaml.safe_dump(
        {
            "apiVersion": "plnt.work/v1",
            "kind": "WorkflowRun",
            "metadata": {"name": name},
            "spec": {"workflow": workflow},
        }
    )


def _settled(kubectl: Kubectl, namespace: str, name: str, phase: str) -> dict[str, object]:
    def reached() -> dict[str, object] | None:
        obj: dict[str, object] = kubectl.json("get", "-n", namespace, f"wfr/{name}")
        return obj if (obj.get("status") or {}).get("phase") == phase else None  # type: ignore[union-attr]

    found: dict[str, object] = wait_for(reached, timeout=90, message=f"{name} in phase {phase}")
    return found


def test_a_run_naming_no_trusted_signer_is_refused_at_admission(
    stack: Stack, kubectl: Kubectl, namespace: str, release: KeyPair
) -> None:
    ref, digest = _signed_spec(stack, "admission", release.private)

    refused = kubectl.run(
        "apply", "-n", namespace, "-f", "-", input=_run("nameless", ref, digest, None), check=False
    )

    assert refused.returncode != 0
    assert "spec.workflow.verify" in refused.stderr
    assert "release" in refused.stderr


def test_a_spec_signed_by_an_untrusted_key_fails_for_good_and_installs_nothing(
    stack: Stack, kubectl: Kubectl, namespace: str, tmp_path: Path
) -> None:
    mallory = Keys(tmp_path / "keys").key_pair("mallory")
    ref, digest = _signed_spec(stack, "untrusted", mallory.private)
    apply(kubectl, namespace, _run("untrusted", ref, digest, {"signer": "release"}))

    obj = _settled(kubectl, namespace, "untrusted", "Failed")

    ready = condition_of(obj, "Ready")  # type: ignore[arg-type]
    assert ready is not None and ready["reason"] == "SignatureRejected"
    assert digest in ready["message"] and "release (key sha256:" in ready["message"]
    pull = obj["status"]["saga"][0]  # type: ignore[index]
    assert (pull["name"], pull["state"], pull["attempts"]) == ("pull", "Failed", 1)
    later = {s["name"]: s["state"] for s in obj["status"]["saga"][1:]}  # type: ignore[index]
    assert "Succeeded" not in later.values() and later.get("install") != "Running", later
    assert runner_pids(stack.state_dir, contains=obj["metadata"]["uid"]) == set()  # type: ignore[index]
    assert "revision" not in obj["status"]  # type: ignore[operator]


def test_a_spec_signed_by_the_trusted_key_deploys_and_history_shows_the_signer(
    stack: Stack, kubectl: Kubectl, namespace: str, release: KeyPair
) -> None:
    ref, digest = _signed_spec(stack, "trusted", release.private)
    apply(kubectl, namespace, _run("trusted", ref, digest, {"signer": "release"}))

    obj = _settled(kubectl, namespace, "trusted", "Ready")

    (record,) = obj["status"]["history"]  # type: ignore[index]
    assert record["signedBy"].startswith("release (key sha256:")
    pull = obj["status"]["saga"][0]  # type: ignore[index]
    assert "signed by release" in pull["message"]
    history = subprocess.run(
        [
            *(sys.executable, "-m", "plnt", "history", "trusted", "-n", namespace),
            *("--kubeconfig", str(stack.server.kubeconfig)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "SIGNED BY" in history and "release (key sha256:" in history
    described = kubectl.run("describe", "-n", namespace, "wfr/trusted").stdout
    assert "Signed By" in described and "release (key sha256:" in described
