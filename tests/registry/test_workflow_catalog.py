"""The catalog's Workflows in the registry: built from scans, written only when they change,
served read-only.

Pure building and the writer over `MemoryStore` (the store the API server serves the
catalog from): a refresh that finds nothing new writes nothing, so resourceVersions and
watchers stay put.
"""

from __future__ import annotations

from typing import Any

import pytest

from plnt.api import errors
from plnt.registry import tables, workflows
from plnt.registry.options import DeleteOptions, ListOptions, WriteOptions
from plnt.registry.workflows import building, sources, syncing
from plnt.registry.workflows.store import CatalogStore
from plnt.storage.memory import MemoryStore
from plnt.workflowspec import documents, scanning

SOURCE = "oci://registry.example/team/summarize"


def _spec(version: str, *, model: str | None = None) -> bytes:
    chosen = f", model: {model}" if model else ""
    return (
        "apiVersion: microagents.plnt.work/v1\nkind: Workflow\n"
        f"metadata: {{name: summarize, version: '{version}', description: v{version}}}\n"
        "steps:\n"
        f"  - {{id: ask, kind: model, prompt: hi{chosen}}}\n"
        "  - {id: more, kind: model, mode: completion, prompt: go}\n"
        "  - {id: shape, kind: transform, needs: [ask, more], expression: 'steps.ask.output'}\n"
        "output: steps.shape.output\n"
    ).encode()


def _found(tag: str, version: str, **kwargs: Any) -> scanning.Found:
    digest = "sha256:" + (tag.encode().hex() * 64)[:64]
    workflow = documents.parse_workflow(_spec(version, **kwargs))
    return scanning.Found(tag, f"{SOURCE}:{tag}@{digest}", digest, workflow, None, "summarize")


def _broken(tag: str) -> scanning.Found:
    problem = scanning.Problem("InvalidSpec", "invalid workflow spec: steps: Field required")
    return scanning.Found(tag, f"{SOURCE}:{tag}", None, None, problem, "summarize")


def test_versions_are_newest_first_in_natural_order_and_the_newest_valid_describes_it() -> None:
    state = building.SourceState(
        SOURCE,
        ("default", "team-a"),
        (_found("v9", "1.9.0"), _found("v10", "1.10.0", model="big"), _broken("v11")),
    )

    built = building.build([state])

    assert set(built) == {("default", "summarize"), ("team-a", "summarize")}
    obj = built[("default", "summarize")]
    spec = obj["spec"]
    assert [v["tag"] for v in spec["versions"]] == ["v11", "v10", "v9"]
    assert spec["latestVersion"] == "1.10.0"
    assert spec["description"] == "v1.10.0"
    assert spec["backends"] == [
        {"kind": "model", "mode": "chat", "model": "big", "steps": ["ask"]},
        {"kind": "model", "mode": "completion", "steps": ["more"]},
    ]
    assert [s["id"] for s in spec["steps"]] == ["ask", "more", "shape"]
    (error,) = obj["status"]["versionErrors"]
    assert error == {
        "source": SOURCE,
        "tag": "v11",
        "reason": "InvalidSpec",
        "message": "invalid workflow spec: steps: Field required",
    }
    assert spec["versions"][0]["valid"] is False


def test_a_failing_source_is_named_in_every_workflow_of_its_namespaces() -> None:
    failing = building.SourceState(
        "s3://specs/prod/", ("default",), (), scanning.Problem("Unavailable", "unreachable")
    )
    built = building.build([building.SourceState(SOURCE, found=(_found("v1", "1.0.0"),)), failing])

    assert built[("default", "summarize")]["status"]["sourceErrors"] == [
        {"source": "s3://specs/prod/", "reason": "Unavailable", "message": "unreachable"}
    ]


def test_the_table_prints_latest_versions_and_a_short_digest() -> None:
    built = building.build(
        [building.SourceState(SOURCE, found=(_found("v1", "1.0.0"), _found("v2", "2.0.0")))]
    )
    obj = built[("default", "summarize")]
    obj["metadata"]["creationTimestamp"] = "2026-07-01T10:00:00Z"

    row = tables.row(workflows.DEFINITION, obj, "None")["cells"]

    names = [c.name for c in tables.columns(workflows.DEFINITION)]
    assert names[:4] == ["Name", "Latest", "Versions", "Digest"] and names[-1] == "Age"
    assert row[:4] == ["summarize", "2.0.0", "2.0.0,1.0.0", "sha256:" + (b"v2".hex() * 3)]


async def test_a_refresh_that_finds_nothing_new_moves_no_resource_version() -> None:
    storage = MemoryStore()
    writer = syncing.CatalogWriter(workflows.DEFINITION, storage)
    state = building.SourceState(SOURCE, found=(_found("v1", "1.0.0"),))
    store = CatalogStore(workflows.DEFINITION, storage, last_refresh=lambda: None)

    assert (await writer.sync(building.build([state]))).created == 1
    first = await store.get("default", "summarize")
    again = await writer.sync(building.build([state]))
    second = await store.get("default", "summarize")

    assert again == syncing.Synced()
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


async def test_a_new_version_changes_the_object_keeping_its_uid_and_bumping_generation() -> None:
    storage = MemoryStore()
    writer = syncing.CatalogWriter(workflows.DEFINITION, storage)
    store = CatalogStore(workflows.DEFINITION, storage, last_refresh=lambda: None)
    await writer.sync(building.build([building.SourceState(SOURCE, found=(_found("v1", "1"),))]))
    before = await store.get("default", "summarize")

    grown = building.SourceState(SOURCE, found=(_found("v1", "1"), _found("v2", "2")))
    synced = await writer.sync(building.build([grown]))
    after = await store.get("default", "summarize")

    assert synced.changed == 1
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["generation"] == 2
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert after["spec"]["latestVersion"] == "2"


async def test_a_workflow_no_source_holds_any_more_is_deleted() -> None:
    storage = MemoryStore()
    writer = syncing.CatalogWriter(workflows.DEFINITION, storage)
    await writer.sync(building.build([building.SourceState(SOURCE, found=(_found("v1", "1"),))]))

    synced = await writer.sync(building.build([]))

    assert synced.deleted == 1
    page = await CatalogStore(workflows.DEFINITION, storage, last_refresh=lambda: None).list(
        "", ListOptions()
    )
    assert page.items == []


async def test_served_objects_carry_the_last_refresh_time_and_every_write_is_405() -> None:
    storage = MemoryStore()
    await syncing.CatalogWriter(workflows.DEFINITION, storage).sync(
        building.build([building.SourceState(SOURCE, found=(_found("v1", "1"),))])
    )
    store = CatalogStore(workflows.DEFINITION, storage, last_refresh=lambda: "2026-07-01T10:00:00Z")

    obj = await store.get("default", "summarize")

    assert obj["status"]["lastRefreshTime"] == "2026-07-01T10:00:00Z"
    with pytest.raises(errors.MethodNotSupported) as refused:
        await store.delete("default", "summarize", DeleteOptions())
    assert refused.value.code == 405
    assert (
        str(refused.value) == 'delete is not supported on resources of kind "workflows.plnt.work"'
    )
    with pytest.raises(errors.MethodNotSupported):
        await store.create("default", obj, WriteOptions())


def test_the_sources_file_names_every_problem() -> None:
    with pytest.raises(sources.SourcesError) as refused:
        sources.parse(
            "sources:\n"
            "  - source: ftp://nowhere\n"
            "  - source: oci://r.example/team/x\n    namespaces: [Bad_NS]\n",
            where="catalog.yaml",
        )

    message = str(refused.value)
    assert message.startswith("catalog.yaml: ")
    assert "sources[0].source" in message and "sources[1].namespaces[0]" in message


def test_the_sources_file_defaults_each_source_to_the_default_namespace() -> None:
    parsed = sources.parse("sources:\n  - source: oci-layout:examples\n  - source: s3://b/p/\n")

    assert parsed == (
        sources.CatalogSource("oci-layout:examples", ("default",)),
        sources.CatalogSource("s3://b/p/", ("default",)),
    )
