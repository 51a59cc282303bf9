"""Scanning sources for the catalog: a real OCI registry (docker-registry), OCI layouts on
disk and S3 (moto_server), each listed, resolved to digests, read and parsed.

A broken spec is found with its reason, never dropped; a spec is read once per digest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plnt.workflowspec import digests, scanning, sources
from plnt.workflowspec.sources import artifacts
from tests.support import registry as registry_support
from tests.support import s3 as s3_support

FAST = sources.Limits(attempts=1, backoff=0.01, timeout=5)


def spec(name: str, version: str = "1.0.0", description: str = "does a thing") -> bytes:
    return (
        "apiVersion: microagents.plnt.work/v1\nkind: Workflow\n"
        f"metadata: {{name: {name}, version: '{version}', description: {description}}}\n"
        "inputs: {type: object, properties: {topic: {type: string}}, required: [topic]}\n"
        "steps:\n"
        "  - {id: ask, kind: model, prompt: 'Tell me about {{ inputs.topic }}'}\n"
        "  - {id: shape, kind: transform, needs: [ask], expression: 'steps.ask.output'}\n"
        "output: steps.shape.output\n"
    ).encode()


BROKEN = b"apiVersion: microagents.plnt.work/v1\nkind: Workflow\nmetadata: {name: broken}\n"


@pytest.fixture(scope="module")
def registry() -> Iterator[registry_support.Registry]:
    with registry_support.running_registry() as running:
        yield running


@pytest.fixture(scope="module")
def moto() -> Iterator[s3_support.Moto]:
    with s3_support.running_moto() as running:
        client: Any = running.client()
        client.create_bucket(Bucket="catalog")
        yield running


def _s3_settings(moto: s3_support.Moto) -> sources.SourceSettings:
    return sources.SourceSettings(
        limits=FAST,
        s3=sources.S3Settings(
            endpoint_url=moto.endpoint_url,
            region=s3_support.REGION,
            access_key_id=moto.access_key_id,
            secret_access_key=moto.secret_access_key,
        ),
    )


async def test_every_tag_of_a_registry_repository_is_found_pinned_to_its_digest(
    registry: registry_support.Registry,
) -> None:
    v1, v2 = spec("summarize", "1.0.0"), spec("summarize", "2.0.0")
    await sources.publish(v1, registry.ref("team/summarize", "v1"))
    await sources.publish(v2, registry.ref("team/summarize", "v2"))
    scanner = scanning.Scanner(sources.SourceSettings(limits=FAST))

    scan = await scanner.scan(f"oci://{registry.host}/team/summarize")

    assert scan.error is None
    by_tag = {f.location: f for f in scan.found}
    assert set(by_tag) == {"v1", "v2"}
    assert by_tag["v2"].digest == digests.compute(v2)
    assert by_tag["v2"].ref == f"oci://{registry.host}/team/summarize:v2@{digests.compute(v2)}"
    assert by_tag["v2"].workflow is not None
    assert by_tag["v2"].workflow.metadata.version == "2.0.0"
    assert by_tag["v1"].name_hint == "summarize"


async def test_a_spec_that_does_not_parse_is_found_with_its_reason_under_its_name(
    registry: registry_support.Registry,
) -> None:
    await sources.publish(BROKEN, registry.ref("team/broken", "v1"))
    scanner = scanning.Scanner(sources.SourceSettings(limits=FAST))

    scan = await scanner.scan(f"oci://{registry.host}/team/broken")

    (found,) = scan.found
    assert found.workflow is None
    assert found.problem is not None and found.problem.reason == scanning.INVALID_SPEC
    assert "steps" in found.problem.message
    assert found.digest == digests.compute(BROKEN)
    assert found.name_hint == "broken"


async def test_a_tampered_blob_is_found_as_a_digest_mismatch(
    registry: registry_support.Registry,
) -> None:
    data = spec("tampered")
    await sources.publish(data, registry.ref("team/tampered", "v1"))
    registry.blob_file(digests.compute(data)).write_bytes(spec("tampered", "6.6.6"))
    scanner = scanning.Scanner(sources.SourceSettings(limits=FAST))

    (found,) = (await scanner.scan(f"oci://{registry.host}/team/tampered")).found

    assert found.problem is not None and found.problem.reason == "DigestMismatch"
    assert found.workflow is None
    assert found.name_hint == "tampered"


async def test_a_repository_that_does_not_exist_is_a_source_error(
    registry: registry_support.Registry,
) -> None:
    scanner = scanning.Scanner(sources.SourceSettings(limits=FAST))

    scan = await scanner.scan(f"oci://{registry.host}/team/nothing-here")

    assert scan.found == ()
    assert scan.error is not None and scan.error.reason == "NotFound"


async def test_an_unreachable_registry_is_a_source_error_not_an_exception() -> None:
    from plnt.processes.ports import free_port

    scanner = scanning.Scanner(sources.SourceSettings(limits=FAST))

    scan = await scanner.scan(f"oci://127.0.0.1:{free_port()}/team/x")

    assert scan.error is not None and scan.error.reason == "Unavailable"


async def test_layouts_under_the_root_are_listed_with_relative_references(tmp_path: Path) -> None:
    root = tmp_path / "layouts"
    fanout = spec("fanout")
    await sources.publish(fanout, f"oci-layout:{root / 'examples'}:fanout")
    await sources.publish(spec("other"), f"oci-layout:{root / 'more'}:other")
    scanner = scanning.Scanner(sources.SourceSettings(limits=FAST), layout_root=root)

    scan = await scanner.scan(scanning.EVERY_LAYOUT)

    assert scan.error is None
    refs = {f.name_hint: f.ref for f in scan.found}
    assert refs == {
        "fanout": f"oci-layout:examples:fanout@{digests.compute(fanout)}",
        "other": f"oci-layout:more:other@{digests.compute(spec('other'))}",
    }


async def test_a_spec_is_read_once_per_digest(tmp_path: Path) -> None:
    layout = tmp_path / "specs"
    data = spec("once")
    pinned = await sources.publish(data, f"oci-layout:{layout}:once")
    scanner = scanning.Scanner(sources.SourceSettings(limits=FAST))
    first = await scanner.scan(f"oci-layout:{layout}")
    blob = layout / "blobs" / "sha256" / digests.hex_of(digests.compute(data))
    blob.unlink()  # a second read of the spec would now fail

    second = await scanner.scan(f"oci-layout:{layout}")

    assert first.found == second.found
    assert second.found[0].ref == str(pinned)
    assert second.found[0].problem is None


async def test_every_spec_key_under_an_s3_prefix_is_found(moto: s3_support.Moto) -> None:
    config = _s3_settings(moto)
    data = spec("triage", "3.1.0")
    await sources.publish(data, "s3://catalog/prod/triage.yaml", config=config)
    await sources.publish(b"not a spec", "s3://catalog/prod/README.txt", config=config)
    await sources.publish(spec("elsewhere"), "s3://catalog/dev/elsewhere.yaml", config=config)
    scanner = scanning.Scanner(config)

    scan = await scanner.scan("s3://catalog/prod/")

    (found,) = scan.found
    assert found.location == "prod/triage.yaml"
    assert found.ref == f"s3://catalog/prod/triage.yaml@{digests.compute(data)}"
    assert found.workflow is not None and found.workflow.metadata.version == "3.1.0"


async def test_a_dataset_pushed_beside_the_specs_of_a_layout_is_not_listed(tmp_path: Path) -> None:
    layout = tmp_path / "specs"
    data = spec("listed")
    await sources.publish(data, f"oci-layout:{layout}:listed")
    dataset = b"- {name: a-case}\n"
    await sources.publish(dataset, f"oci-layout:{layout}:evals", kind=artifacts.DATASET)
    scanner = scanning.Scanner(sources.SourceSettings(limits=FAST))

    scan = await scanner.scan(f"oci-layout:{layout}")

    assert scan.error is None
    assert [(f.location, f.problem) for f in scan.found] == [("listed", None)]
