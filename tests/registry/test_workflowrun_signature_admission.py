"""Admission says no early: where the server's signature policy binds a namespace, a
WorkflowRun whose `spec.workflow.verify` names none of its trusted signers is a 422
naming the field; elsewhere `verify` is checked by its schema alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from plnt.api import errors
from plnt.registry import workflowruns
from plnt.registry.definitions import Object
from plnt.registry.options import WriteOptions
from plnt.registry.store import ResourceStore
from plnt.storage.memory import MemoryStore
from plnt.workflowspec import signers
from tests.support.signing import Keys

DIGEST = "sha256:" + "a" * 64


def workflowrun(name: str, verify: dict[str, Any] | None) -> Object:
    workflow: dict[str, Any] = {"ref": "oci://r.example/wf:1", "digest": DIGEST}
    if verify is not None:
        workflow["verify"] = verify
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "WorkflowRun",
        "metadata": {"name": name},
        "spec": {"workflow": workflow},
    }


@pytest.fixture
def runs(memory_store: MemoryStore, tmp_path: Path) -> ResourceStore:
    pair = Keys(tmp_path).key_pair("release")
    policy = signers.SignaturePolicy.from_files([f"release={pair.public}"], required_in=["signed"])
    return ResourceStore(workflowruns.with_teardown(signatures=policy), memory_store)


@pytest.mark.parametrize(
    ("verify", "field"),
    [
        (None, "spec.workflow.verify"),
        ({"signer": "mallory"}, "spec.workflow.verify.signer"),
        ({"publicKey": {"file": "/tmp/own.pub"}}, "spec.workflow.verify.signer"),
    ],
    ids=["no verify", "an untrusted signer", "the run's own key"],
)
async def test_a_run_the_policy_cannot_verify_is_refused_naming_the_field(
    runs: ResourceStore, verify: dict[str, Any] | None, field: str
) -> None:
    with pytest.raises(errors.Invalid) as raised:
        await runs.create("signed", workflowrun("r", verify), WriteOptions())
    assert raised.value.code == 422
    assert [cause.field for cause in raised.value.causes] == [field]
    assert "release" in raised.value.causes[0].message


async def test_a_run_naming_a_trusted_signer_is_admitted(runs: ResourceStore) -> None:
    created = await runs.create("signed", workflowrun("r", {"signer": "release"}), WriteOptions())
    assert created.object["spec"]["workflow"]["verify"] == {"signer": "release"}


async def test_namespaces_the_policy_does_not_bind_take_runs_without_verify(
    runs: ResourceStore,
) -> None:
    created = await runs.create("other", workflowrun("r", None), WriteOptions())
    assert "verify" not in created.object["spec"]["workflow"]


async def test_verify_names_exactly_one_root_of_trust(runs: ResourceStore) -> None:
    both = {"signer": "release", "publicKey": {"file": "/k.pub"}}
    with pytest.raises(errors.Invalid) as raised:
        await runs.create("other", workflowrun("r", both), WriteOptions())
    assert "spec.workflow.verify" in str(raised.value)
    with pytest.raises(errors.Invalid) as raised:
        await runs.create("other", workflowrun("r", {"ca": {"file": "/ca.pem"}}), WriteOptions())
    assert "identity" in str(raised.value)
