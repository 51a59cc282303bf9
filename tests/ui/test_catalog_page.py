"""The Catalog page through Debian's Chromium: the catalog's Workflows with their versions
and digests, a broken spec with its reason, and Deploy pre-filling a WorkflowRun pinned to
the version's digest, which the page then creates.

Its own `plnt up --no-sagas` (nothing deploys; the run is only created) with two layouts
under the state directory, as `make up` pushes the examples.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import Browser, expect

from plnt.workflowspec import digests, sources
from tests.support.browser import screenshot
from tests.support.plnt_server import REPO, Kubectl, PlntServer, wait_for
from tests.support.ui import UiServer, start_ui

FANOUT = (REPO / "examples" / "fanout.workflow.yaml").read_bytes()
BROKEN = b"apiVersion: microagents.plnt.work/v1\nkind: Workflow\nmetadata: {name: halfdone}\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlntServer]:
    state = tmp_path_factory.mktemp("plnt-ui-catalog")
    for data, ref in (
        (FANOUT, f"oci-layout:{state / 'layouts' / 'examples'}:fanout"),
        (BROKEN, f"oci-layout:{state / 'layouts' / 'drafts'}:halfdone"),
    ):
        asyncio.run(sources.publish(data, ref))
    with PlntServer(state, extra_args=("--catalog-refresh", "1")) as srv:
        yield srv


@pytest.fixture(scope="module")
def catalog_ui(server: PlntServer) -> Iterator[UiServer]:
    ui = start_ui(server.kubeconfig)
    try:
        yield ui
    finally:
        ui.child.stop()


@pytest.fixture
def kubectl(server: PlntServer, tmp_path: Path) -> Kubectl:
    cache = tmp_path / "home" / ".kube" / "cache"
    cache.mkdir(parents=True)
    return Kubectl(kubeconfig=server.kubeconfig, cache_dir=cache)


def test_the_catalog_page_lists_versions_digests_and_a_broken_spec_with_its_reason(
    catalog_ui: UiServer, browser: Browser, kubectl: Kubectl, tmp_path: Path
) -> None:
    wait_for(
        lambda: len(kubectl.json("get", "workflows", "-n", "default")["items"]) == 2,
        timeout=30,
        message="both workflows in the catalog",
    )
    page = catalog_ui.open(browser, "/ns/default/runs")

    page.get_by_role("link", name="Catalog").click()

    fanout = page.get_by_test_id("workflow-fanout")
    expect(fanout).to_contain_text("1.0.0")
    expect(fanout).to_contain_text(f"sha256:{digests.compute(FANOUT)[7:19]}")
    expect(fanout).to_contain_text("Summarise a topic from two angles")
    expect(page.get_by_test_id("problem-halfdone")).to_contain_text("InvalidSpec")
    screenshot(page, tmp_path, "catalog")
    page.context.close()


def test_deploy_pre_fills_a_workflowrun_pinned_to_the_digest_and_creates_it(
    catalog_ui: UiServer, browser: Browser, kubectl: Kubectl, tmp_path: Path
) -> None:
    wait_for(
        lambda: kubectl.json("get", "workflows", "-n", "default")["items"],
        timeout=30,
        message="the catalog",
    )
    page = catalog_ui.open(browser, "/ns/default/catalog")
    page.get_by_test_id("deploy-fanout").click()

    manifest = yaml.safe_load(page.get_by_test_id("run-manifest").input_value())
    assert manifest["kind"] == "WorkflowRun"
    assert manifest["metadata"] == {"name": "fanout", "namespace": "default"}
    assert manifest["spec"]["workflow"] == {
        "ref": "oci-layout:examples:fanout",
        "digest": digests.compute(FANOUT),
    }
    screenshot(page, tmp_path, "catalog-deploy")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Create WorkflowRun").click()

    page.wait_for_url("**/ns/default/runs/fanout", timeout=15_000)
    run = kubectl.json("get", "workflowrun", "fanout", "-n", "default")
    assert run["spec"]["workflow"]["digest"] == digests.compute(FANOUT)
    page.context.close()
