"""The workflow catalog through the real kubectl against a real `plnt up`.

The server lists a real OCI registry's repository (docker-registry), a layout under its
state directory (as `make up` pushes the examples) and a layout holding a broken spec,
from a sources file, refreshed every second. Every wait is a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from plnt.workflowspec import digests, sources
from tests.support.plnt_server import Kubectl, PlntServer, wait_for
from tests.support.registry import Registry, running_registry

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
FANOUT = (REPO / "examples" / "fanout.workflow.yaml").read_bytes()
BROKEN = b"apiVersion: microagents.plnt.work/v1\nkind: Workflow\nmetadata: {name: halfdone}\n"


def summarize(version: str) -> bytes:
    return (
        "apiVersion: microagents.plnt.work/v1\nkind: Workflow\n"
        f"metadata: {{name: summarize, version: '{version}', description: Summarise a text}}\n"
        "inputs: {type: object, properties: {text: {type: string}}, required: [text]}\n"
        "steps:\n"
        "  - {id: ask, kind: model, prompt: 'Summarise {{ inputs.text }}', model: small}\n"
        "output: steps.ask.output\n"
    ).encode()


def publish(data: bytes, ref: str) -> str:
    return str(asyncio.run(sources.publish(data, ref)))


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    with running_registry() as running:
        yield running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, registry: Registry) -> Iterator[PlntServer]:
    state = tmp_path_factory.mktemp("plnt-catalog")
    publish(FANOUT, f"oci-layout:{state / 'layouts' / 'examples'}:fanout")
    publish(BROKEN, f"oci-layout:{state / 'layouts' / 'drafts'}:halfdone")
    publish(summarize("1.0.0"), registry.ref("team/summarize", "v1"))
    sources_file = state / "catalog.yaml"
    sources_file.write_text(
        "sources:\n"
        f"  - source: oci://{registry.host}/team/summarize\n"
        "    namespaces: [default]\n"
        "  - source: oci-layout:examples\n"
        "  - source: oci-layout:drafts\n"
        "  - source: oci://127.0.0.1:9/team/unreachable\n"
    )
    with PlntServer(
        state, extra_args=("--catalog-sources", str(sources_file), "--catalog-refresh", "1")
    ) as srv:
        yield srv


@pytest.fixture
def kubectl(server: PlntServer, tmp_path: Path) -> Kubectl:
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    return Kubectl(kubeconfig=server.kubeconfig, cache_dir=cache)


def listed(kubectl: Kubectl, *names: str) -> dict[str, dict[str, object]]:
    def found() -> dict[str, dict[str, object]] | None:
        items = kubectl.json("get", "workflows", "-n", "default")["items"]
        by_name = {i["metadata"]["name"]: i for i in items}
        return by_name if set(names) <= set(by_name) else None

    result: dict[str, dict[str, object]] = wait_for(
        found, timeout=30, message=f"workflows {names} in the catalog"
    )
    return result


def test_kubectl_get_workflows_prints_latest_versions_and_short_digests(kubectl: Kubectl) -> None:
    listed(kubectl, "summarize", "fanout")

    out = kubectl.run("get", "workflows", "-n", "default").stdout.splitlines()

    assert out[0].split() == ["NAME", "LATEST", "VERSIONS", "DIGEST", "AGE"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    fanout = digests.compute(FANOUT)
    assert rows["fanout"][1:4] == ["1.0.0", "1.0.0", f"sha256:{fanout[7:19]}"]
    assert rows["summarize"][1] == "1.0.0"


def test_kubectl_describe_workflow_shows_versions_inputs_steps_and_backends(
    kubectl: Kubectl,
) -> None:
    listed(kubectl, "summarize")

    out = kubectl.run("describe", "workflow", "summarize", "-n", "default").stdout

    assert "Kind:         Workflow" in out
    assert f"sha256:{digests.compute(summarize('1.0.0'))[7:]}" in out
    assert "Summarise a text" in out
    assert "Latest Version:  1.0.0" in out
    assert "Last Refresh Time:" in out
    for text in ("Backends:", "Model:  small", "Steps:", "Id:     ask", "Required:"):
        assert text in out, text


def test_a_broken_spec_is_listed_with_its_reason(kubectl: Kubectl) -> None:
    obj = listed(kubectl, "halfdone")["halfdone"]

    (version,) = obj["spec"]["versions"]  # type: ignore[index]
    assert version["valid"] is False and version["digest"] == digests.compute(BROKEN)
    (error,) = obj["status"]["versionErrors"]  # type: ignore[index]
    assert error["reason"] == "InvalidSpec"
    assert "steps" in error["message"]
    row = kubectl.run("get", "workflow", "halfdone", "-n", "default").stdout.splitlines()[1]
    assert row.split()[1:4] == ["<none>", "halfdone", "<none>"]


def test_an_unreachable_source_is_named_in_status(kubectl: Kubectl) -> None:
    obj = listed(kubectl, "fanout")["fanout"]

    errors = obj["status"]["sourceErrors"]  # type: ignore[index]
    assert [e["source"] for e in errors] == ["oci://127.0.0.1:9/team/unreachable"]
    assert errors[0]["reason"] == "Unavailable"


def test_a_newly_pushed_tag_appears_without_any_request_asking_for_it(
    kubectl: Kubectl, registry: Registry
) -> None:
    listed(kubectl, "summarize")
    tag = f"v2-{uuid.uuid4().hex[:6]}"
    pinned = publish(summarize("2.0.0"), registry.ref("team/summarize", tag))

    def refreshed() -> dict[str, object] | None:
        obj = kubectl.json("get", "workflow", "summarize", "-n", "default")
        return obj if obj["spec"]["latestVersion"] == "2.0.0" else None

    obj = wait_for(refreshed, timeout=30, message="the new tag in the catalog")
    newest = obj["spec"]["versions"][0]
    assert newest["tag"] == tag and newest["ref"] == pinned


def test_resource_version_moves_only_when_a_refresh_finds_a_change(kubectl: Kubectl) -> None:
    first = listed(kubectl, "fanout")["fanout"]
    seen = first["status"]["lastRefreshTime"]  # type: ignore[index]

    def later() -> dict[str, object] | None:
        obj = kubectl.json("get", "workflow", "fanout", "-n", "default")
        return obj if obj["status"]["lastRefreshTime"] != seen else None

    second = wait_for(later, timeout=30, message="another refresh")
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]  # type: ignore[index]


def test_writes_are_refused_with_405_and_discovery_lists_only_read_verbs(
    kubectl: Kubectl,
) -> None:
    listed(kubectl, "fanout")
    manifest = json.dumps(
        {"apiVersion": "plnt.work/v1", "kind": "Workflow", "metadata": {"name": "mine"}}
    )

    # No PATCH operation for kubectl to find server-side validation by: without
    # --validate=false it would try client-side validation from OpenAPI v2 first.
    created = kubectl.run(
        "create", "--validate=false", "-f", "-", "-n", "default", input=manifest, check=False
    )
    deleted = kubectl.run("delete", "workflow", "fanout", "-n", "default", check=False)
    resources = kubectl.run("api-resources", "--api-group=plnt.work", "-o", "wide").stdout

    assert created.returncode != 0 and "MethodNotAllowed" in created.stderr
    assert deleted.returncode != 0
    assert 'delete is not supported on resources of kind "workflows.plnt.work"' in deleted.stderr
    row = next(line for line in resources.splitlines() if line.startswith("workflows "))
    assert row.split()[4] == "get,list,watch"
    assert kubectl.json("get", "workflow", "fanout", "-n", "default")["metadata"]["name"]


def plnt(server: PlntServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plnt", *args, "--kubeconfig", str(server.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def test_plnt_catalog_lists_the_catalog_with_what_could_not_be_read(
    server: PlntServer, kubectl: Kubectl
) -> None:
    listed(kubectl, "fanout", "halfdone", "summarize")

    result = plnt(server, "catalog")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "LATEST", "VERSIONS", "DIGEST", "DESCRIPTION"]
    fanout = next(line for line in lines if line.startswith("fanout "))
    assert f"sha256:{digests.compute(FANOUT)[7:19]}" in fanout
    assert "Summarise a topic from two angles" in fanout
    assert any(line.strip().startswith("halfdone halfdone: InvalidSpec:") for line in lines)
    assert any("oci://127.0.0.1:9/team/unreachable: Unavailable" in line for line in lines)


def test_plnt_catalog_shows_one_workflow_and_its_manifest_deploys_the_pinned_digest(
    server: PlntServer, kubectl: Kubectl
) -> None:
    listed(kubectl, "fanout")

    shown = plnt(server, "catalog", "fanout")
    manifest = plnt(server, "catalog", "fanout", "--manifest")
    applied = kubectl.run("apply", "-f", "-", input=manifest.stdout)

    assert shown.returncode == 0, shown.stderr
    assert "Steps:" in shown.stdout and "join: transform (needs pros, cons)" in shown.stdout
    assert "model (chat) for pros, cons" in shown.stdout
    assert "workflowrun.plnt.work/fanout created" in applied.stdout
    run = kubectl.json("get", "workflowrun", "fanout", "-n", "default")
    assert run["spec"]["workflow"] == {
        "ref": "oci-layout:examples:fanout",
        "digest": digests.compute(FANOUT),
    }
    kubectl.run("delete", "workflowrun", "fanout", "-n", "default", "--wait=false")
