"""The pull activity holds the spec (and the run's dataset) to the signer the run and the
worker's policy require, offline, and fails for good (`SignatureRejected`) naming the
digest and the signer expected; the verified signer travels back for the timeline.

Real keys made here, real signatures (model-signing), a real OCI layout and spec cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from plnt.client.clients import PlntClient
from plnt.client.kubeconfig import Connection
from plnt.sagas import failures
from plnt.sagas import values as v
from plnt.sagas.deploying.activities import DeployActivities
from plnt.sagas.failures import Failure
from plnt.sagas.speccache import SpecCache
from plnt.sagas.targets.local import LocalTarget
from plnt.workflowspec import signers, signing, sources
from plnt.workflowspec.sources import artifacts
from tests.support.signing import KeyPair, Keys

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fanout.workflow.yaml"
DATASET = b'{"name": "one", "input": {"text": "hi"}}\n'


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys")


@pytest.fixture
def release(keys: Keys) -> KeyPair:
    return keys.key_pair("release")


@pytest.fixture
def policy(release: KeyPair) -> signers.SignaturePolicy:
    return signers.SignaturePolicy.from_files([f"release={release.public}"], required_in=["prod"])


async def _publish(tmp_path: Path, tag: str, key: Path | None) -> tuple[str, str]:
    data = await asyncio.to_thread(EXAMPLE.read_bytes)
    signature = signing.sign(data, key=key) if key is not None else None
    ref = f"oci-layout:{tmp_path / 'layout'}:{tag}"
    pinned = await sources.publish(data, ref, signature=signature)
    return ref, str(pinned.digest)


@pytest.fixture
async def activities(
    tmp_path: Path, policy: signers.SignaturePolicy
) -> AsyncIterator[DeployActivities]:
    api = PlntClient(Connection(server="https://127.0.0.1:9"))  # never reached here
    built = DeployActivities(
        api=api,
        target=LocalTarget(tmp_path / "runners"),
        specs=SpecCache(tmp_path / "specs"),
        signatures=policy,
    )
    try:
        yield built
    finally:
        await built.close()


async def _rejected(activities: DeployActivities, request: v.PullRequest) -> ApplicationError:
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(activities.pull, request)
    error = raised.value
    assert error.type == Failure.SIGNATURE_REJECTED.value
    assert error.non_retryable
    assert Failure(error.type) in failures.SPEC_ERRORS
    return error


async def test_a_spec_signed_by_the_trusted_signer_pulls_and_names_it(
    activities: DeployActivities, tmp_path: Path, release: KeyPair
) -> None:
    ref, digest = await _publish(tmp_path, "signed", release.private)

    result = await ActivityEnvironment().run(
        activities.pull, v.PullRequest(ref, digest, namespace="prod", verify={"signer": "release"})
    )

    assert result.signer is not None and result.signer.startswith("release (key sha256:")


async def test_an_unsigned_spec_under_the_policy_fails_for_good_naming_digest_and_signer(
    activities: DeployActivities, tmp_path: Path
) -> None:
    ref, digest = await _publish(tmp_path, "unsigned", None)

    error = await _rejected(
        activities, v.PullRequest(ref, digest, namespace="prod", verify={"signer": "release"})
    )

    assert digest in error.message
    assert "release (key sha256:" in error.message
    assert "no signature" in error.message


async def test_a_spec_signed_by_another_key_fails_for_good(
    activities: DeployActivities, tmp_path: Path, keys: Keys
) -> None:
    mallory = keys.key_pair("mallory")
    ref, digest = await _publish(tmp_path, "mallory", mallory.private)

    error = await _rejected(
        activities, v.PullRequest(ref, digest, namespace="prod", verify={"signer": "release"})
    )
    assert "not the trusted key" in error.message


async def test_a_run_admitted_before_the_policy_without_verify_fails_for_good(
    activities: DeployActivities, tmp_path: Path, release: KeyPair
) -> None:
    ref, digest = await _publish(tmp_path, "signed", release.private)

    error = await _rejected(activities, v.PullRequest(ref, digest, namespace="prod"))
    assert "names no trusted signer" in error.message


async def test_outside_the_policy_a_run_may_name_its_own_key_file_or_none(
    activities: DeployActivities, tmp_path: Path, keys: Keys
) -> None:
    own = keys.key_pair("own")
    ref, digest = await _publish(tmp_path, "own", own.private)
    environment = ActivityEnvironment()

    verified = await environment.run(
        activities.pull,
        v.PullRequest(
            ref, digest, namespace="dev", verify={"publicKey": {"file": str(own.public)}}
        ),
    )
    unverified = await environment.run(activities.pull, v.PullRequest(ref, digest, namespace="dev"))

    assert verified.signer is not None and str(own.public) in verified.signer
    assert unverified.signer is None


async def test_a_dataset_not_signed_by_the_runs_signer_fails_the_pull_for_good(
    activities: DeployActivities, tmp_path: Path, release: KeyPair, keys: Keys
) -> None:
    ref, digest = await _publish(tmp_path, "signed", release.private)
    mallory = keys.key_pair("mallory")
    requests = {}
    for name, signed_by in (("good", release.private), ("bad", mallory.private)):
        data = DATASET.replace(b"one", name.encode())
        pinned = await sources.publish(
            data,
            f"oci-layout:{tmp_path / 'datasets'}:{name}",
            kind=artifacts.DATASET_LINES,
            signature=signing.sign(data, key=signed_by),
        )
        requests[name] = v.PullRequest(
            ref,
            digest,
            namespace="prod",
            verify={"signer": "release"},
            dataset_ref=str(pinned),
            dataset_digest=str(pinned.digest),
        )

    assert (await ActivityEnvironment().run(activities.pull, requests["good"])).signer
    error = await _rejected(activities, requests["bad"])
    assert str(requests["bad"].dataset_digest) in error.message
