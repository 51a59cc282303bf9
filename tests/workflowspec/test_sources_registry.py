"""The OCI registry source against a real registry (docker-registry, CNCF distribution 2.8).

Each module-scoped registry runs as a child process on 127.0.0.1 with its own config and
storage; one of them requires htpasswd basic auth.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator

import pytest

from plnt.workflowspec import digests, errors, references, sources
from plnt.workflowspec.sources import artifacts
from tests.support import registry as support

SPEC = b"apiVersion: microagents.plnt.work/v1\nkind: Workflow\nmetadata: {name: demo}\n"
FAST_RETRIES = sources.Limits(attempts=3, backoff=0.01, timeout=5)


@pytest.fixture(scope="module")
def open_registry() -> Iterator[support.Registry]:
    with support.running_registry() as running:
        yield running


@pytest.fixture(scope="module")
def auth_registry() -> Iterator[support.Registry]:
    with support.running_registry(username="alice", password="correct horse") as running:
        yield running


def _as(user: str | None, password: str | None) -> sources.SourceSettings:
    return sources.SourceSettings(
        limits=FAST_RETRIES,
        registry=sources.RegistrySettings(username=user, password=password),
    )


async def test_push_then_pull_by_tag_returns_the_spec(open_registry: support.Registry) -> None:
    pinned = await sources.publish(SPEC, open_registry.ref("team/by-tag"))

    pulled = await sources.pull(open_registry.ref("team/by-tag"))

    assert str(pinned) == f"{open_registry.ref('team/by-tag')}@{digests.compute(SPEC)}"
    assert pulled.data == SPEC
    assert pulled.ref == pinned


async def test_pull_by_digest_fetches_the_blob_without_the_tag(
    open_registry: support.Registry,
) -> None:
    await sources.publish(SPEC, open_registry.ref("team/by-digest"))

    pulled = await sources.pull(
        f"oci://{open_registry.host}/team/by-digest@{digests.compute(SPEC)}"
    )

    assert pulled.data == SPEC


async def test_pushed_manifest_carries_the_plnt_artifact_type_and_layer_media_type(
    open_registry: support.Registry,
) -> None:
    await sources.publish(SPEC, open_registry.ref("team/shape"))
    request = urllib.request.Request(
        f"http://{open_registry.host}/v2/team/shape/manifests/v1",
        headers={"Accept": artifacts.MANIFEST_MEDIA_TYPE},
    )

    def fetch_manifest() -> tuple[str, bytes]:
        with urllib.request.urlopen(request, timeout=5) as response:
            return str(response.headers["Content-Type"]), response.read()

    content_type, raw = await asyncio.to_thread(fetch_manifest)
    manifest = json.loads(raw)

    assert content_type == artifacts.MANIFEST_MEDIA_TYPE
    assert manifest["artifactType"] == artifacts.ARTIFACT_TYPE
    assert manifest["config"]["mediaType"] == artifacts.EMPTY_CONFIG_MEDIA_TYPE
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == artifacts.WORKFLOW_MEDIA_TYPE
    assert layer["digest"] == digests.compute(SPEC)


async def test_blob_tampered_in_registry_storage_is_refused_naming_both_digests(
    open_registry: support.Registry,
) -> None:
    spec = SPEC + b"# tamper target\n"
    pinned = await sources.publish(spec, open_registry.ref("team/tampered"))
    expected = digests.compute(spec)
    evil = b"x" * len(spec)  # same length: the registry serves it without complaint
    open_registry.blob_file(expected).write_bytes(evil)

    for ref in (pinned, references.unpinned(pinned)):
        with pytest.raises(errors.DigestMismatch) as caught:
            await sources.pull(ref)
        assert caught.value.expected == expected
        assert caught.value.actual == digests.compute(evil)
        assert expected in str(caught.value) and digests.compute(evil) in str(caught.value)


async def test_unknown_tag_is_not_found(open_registry: support.Registry) -> None:
    with pytest.raises(errors.NotFound, match="'missing'"):
        await sources.pull(open_registry.ref("team/nothing", "missing"))


async def test_spec_over_the_limit_is_refused_before_the_blob_is_read(
    open_registry: support.Registry,
) -> None:
    pinned = await sources.publish(SPEC, open_registry.ref("team/large"))
    small = sources.SourceSettings(limits=sources.Limits(max_bytes=10))

    for ref in (references.unpinned(pinned), pinned):
        with pytest.raises(errors.TooLarge) as caught:
            await sources.pull(ref, config=small)
        assert caught.value.limit == 10
    with pytest.raises(errors.TooLarge):
        await sources.publish(SPEC, open_registry.ref("team/large", "v2"), config=small)


async def test_push_and_pull_with_basic_auth_succeed_with_the_right_password(
    auth_registry: support.Registry,
) -> None:
    config = _as("alice", "correct horse")
    pinned = await sources.publish(SPEC, auth_registry.ref("team/private"), config=config)

    assert (await sources.pull(auth_registry.ref("team/private"), config=config)).data == SPEC
    assert (await sources.pull(pinned, config=config)).data == SPEC


async def test_wrong_password_is_a_clear_authentication_error_without_retries(
    auth_registry: support.Registry,
) -> None:
    with pytest.raises(errors.AuthenticationFailed, match="rejected the credentials"):
        await sources.pull(auth_registry.ref("team/private"), config=_as("alice", "wrong"))
    with pytest.raises(errors.AuthenticationFailed, match="rejected the credentials"):
        await sources.publish(SPEC, auth_registry.ref("team/other"), config=_as("alice", "wrong"))


async def test_missing_credentials_are_a_clear_authentication_error(
    auth_registry: support.Registry,
) -> None:
    with pytest.raises(errors.AuthenticationFailed, match="requires credentials"):
        await sources.pull(auth_registry.ref("team/private"), config=_as(None, None))


async def test_registry_down_is_unavailable_after_a_bounded_number_of_attempts() -> None:
    port = support.free_port()  # nothing listens here
    config = sources.SourceSettings(limits=FAST_RETRIES)

    with pytest.raises(errors.Unavailable) as caught:
        await sources.pull(f"oci://127.0.0.1:{port}/team/down:v1", config=config)

    assert caught.value.attempts == 3
    assert "connection refused" in str(caught.value)
    assert "gave up after 3 attempts" in str(caught.value)


@pytest.fixture(scope="module")
def token_registry() -> Iterator[support.Registry]:
    with support.running_token_registry(username="carol", password="tok-pw") as running:
        yield running


async def test_bearer_token_auth_fetches_a_token_per_scope_for_push_and_pull(
    token_registry: support.Registry,
) -> None:
    config = _as("carol", "tok-pw")
    pinned = await sources.publish(SPEC, token_registry.ref("team/tokened"), config=config)

    assert (await sources.pull(token_registry.ref("team/tokened"), config=config)).data == SPEC
    assert (await sources.pull(pinned, config=config)).data == SPEC


async def test_anonymous_bearer_token_allows_pull_but_not_push(
    token_registry: support.Registry,
) -> None:
    await sources.publish(SPEC, token_registry.ref("team/public"), config=_as("carol", "tok-pw"))
    anonymous = _as(None, None)

    assert (await sources.pull(token_registry.ref("team/public"), config=anonymous)).data == SPEC
    with pytest.raises(errors.AuthenticationFailed):
        await sources.publish(SPEC, token_registry.ref("team/public", "v2"), config=anonymous)


async def test_wrong_password_at_the_token_service_is_a_clear_authentication_error(
    token_registry: support.Registry,
) -> None:
    with pytest.raises(
        errors.AuthenticationFailed, match=r"token service .* refused the credentials"
    ):
        await sources.pull(token_registry.ref("team/tokened"), config=_as("carol", "wrong"))
