"""The S3 source against moto_server with SigV4 checking switched on.

moto is a test double, not a real object store: it is the only S3-compatible server that can
run here. `tests.support.s3` turns its signature checking on (IAM keys created through its
API, then INITIAL_NO_AUTH_ACTION_COUNT = 0), so a wrong secret really is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from plnt.processes.ports import free_port
from plnt.workflowspec import digests, errors, references, sources
from plnt.workflowspec.sources import artifacts
from tests.support import s3 as support

SPEC = b"apiVersion: microagents.plnt.work/v1\nkind: Workflow\n"
BUCKET = "specs"


@pytest.fixture(scope="module")
def moto() -> Iterator[support.Moto]:
    with support.running_moto() as running:
        client: Any = running.client()
        client.create_bucket(Bucket=BUCKET)
        yield running


def _settings(
    moto: support.Moto, *, secret: str | None = None, **limits: Any
) -> sources.SourceSettings:
    return sources.SourceSettings(
        limits=sources.Limits(**limits),
        s3=sources.S3Settings(
            endpoint_url=moto.endpoint_url,
            region=support.REGION,
            access_key_id=moto.access_key_id,
            secret_access_key=secret or moto.secret_access_key,
        ),
    )


async def test_publish_then_pull_by_key_returns_the_spec(moto: support.Moto) -> None:
    pinned = await sources.publish(SPEC, f"s3://{BUCKET}/a/summarize.yaml", config=_settings(moto))

    pulled = await sources.pull(f"s3://{BUCKET}/a/summarize.yaml", config=_settings(moto))

    assert str(pinned) == f"s3://{BUCKET}/a/summarize.yaml@{digests.compute(SPEC)}"
    assert pulled.data == SPEC
    assert pulled.ref == pinned


async def test_pull_by_pinned_digest_verifies_the_object(moto: support.Moto) -> None:
    pinned = await sources.publish(SPEC, f"s3://{BUCKET}/b.yaml", config=_settings(moto))
    assert (await sources.pull(pinned, config=_settings(moto))).digest == digests.compute(SPEC)


async def test_object_overwritten_after_pinning_is_refused_naming_both_digests(
    moto: support.Moto,
) -> None:
    pinned = await sources.publish(SPEC, f"s3://{BUCKET}/c.yaml", config=_settings(moto))
    await sources.publish(b"kind: Changed\n", f"s3://{BUCKET}/c.yaml", config=_settings(moto))

    with pytest.raises(errors.DigestMismatch) as caught:
        await sources.pull(pinned, config=_settings(moto))

    assert caught.value.expected == digests.compute(SPEC)
    assert caught.value.actual == digests.compute(b"kind: Changed\n")
    assert caught.value.expected in str(caught.value) and caught.value.actual in str(caught.value)


async def test_wrong_secret_is_a_clear_authentication_error(moto: support.Moto) -> None:
    await sources.publish(SPEC, f"s3://{BUCKET}/d.yaml", config=_settings(moto))
    wrong = _settings(moto, secret="not-the-secret")

    with pytest.raises(errors.AuthenticationFailed, match="SignatureDoesNotMatch"):
        await sources.pull(f"s3://{BUCKET}/d.yaml", config=wrong)
    with pytest.raises(errors.AuthenticationFailed):
        await sources.publish(SPEC, f"s3://{BUCKET}/e.yaml", config=wrong)


async def test_missing_key_is_not_found(moto: support.Moto) -> None:
    with pytest.raises(errors.NotFound, match="NoSuchKey"):
        await sources.pull(f"s3://{BUCKET}/never-written.yaml", config=_settings(moto))


async def test_object_over_the_limit_is_refused_from_its_announced_size(moto: support.Moto) -> None:
    pinned = await sources.publish(SPEC, f"s3://{BUCKET}/f.yaml", config=_settings(moto))
    with pytest.raises(errors.TooLarge) as caught:
        await sources.pull(references.unpinned(pinned), config=_settings(moto, max_bytes=8))
    assert caught.value.size == len(SPEC)
    with pytest.raises(errors.TooLarge):
        await sources.publish(SPEC, f"s3://{BUCKET}/g.yaml", config=_settings(moto, max_bytes=8))


async def test_endpoint_down_is_unavailable_after_bounded_attempts(moto: support.Moto) -> None:
    down = sources.SourceSettings(
        limits=sources.Limits(attempts=2, timeout=2),
        s3=sources.S3Settings(
            endpoint_url=f"http://127.0.0.1:{free_port()}",
            region=support.REGION,
            access_key_id=moto.access_key_id,
            secret_access_key=moto.secret_access_key,
        ),
    )
    with pytest.raises(errors.Unavailable) as caught:
        await sources.pull(f"s3://{BUCKET}/d.yaml", config=down)
    assert caught.value.attempts == 2
    assert "gave up after 2 attempts" in str(caught.value)


async def test_a_dataset_is_put_with_its_media_type_and_pulled_back_by_key(
    moto: support.Moto,
) -> None:
    dataset = b'{"name": "a-case"}\n{"name": "b-case"}\n'
    key = "evals/chat.jsonl"

    pinned = await sources.publish(
        dataset, f"s3://{BUCKET}/{key}", config=_settings(moto), kind=artifacts.DATASET_LINES
    )
    pulled = await sources.pull(f"s3://{BUCKET}/{key}", config=_settings(moto))

    assert pulled.data == dataset and pulled.ref == pinned
    head = moto.client().head_object(Bucket=BUCKET, Key=key)
    assert head["ContentType"] == artifacts.DATASET_LINES_MEDIA_TYPE
