"""The browser UI against a real stack: live timeline, actions, invocation log, invoke, RBAC.

Each test drives Debian's Chromium through `plnt ui` and keeps a screenshot of the page
it checked (tests/support/browser.py says where).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Literal

import yaml
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import screenshot
from tests.support.llm import threaded_llm, tokens_of
from tests.support.manifests import apply, backend_manifest, workflowrun
from tests.support.plnt_server import REPO, Kubectl
from tests.support.stack import Stack, WorkerProcess
from tests.support.ui import (
    Hold,
    ThreadedApi,
    UiServer,
    held_workflow,
    publish,
    start_ui,
    wait_ready,
)

DEPLOY = 90_000  # ms: a deploy on a busy 2-core machine
CHAT = REPO / "examples" / "chat.workflow.yaml"


def following(page: Page, selector: str) -> None:
    """Wait until the element's live stream is open (its watch is running)."""
    expect(page.locator(selector)).to_have_attribute("data-following", "open", timeout=10_000)


def test_a_missing_or_wrong_launch_token_is_refused_with_403(
    ui: UiServer, browser: Browser, screenshots: Path
) -> None:
    context = browser.new_context()
    page = context.new_page()
    missing = page.goto(ui.base + "/ns/default/runs")
    assert missing is not None and missing.status == 403
    expect(page.get_by_test_id("error-message")).to_contain_text("URL `plnt ui` printed")
    wrong = page.goto(ui.base + "/?token=" + "x" * len(ui.token))
    assert wrong is not None and wrong.status == 403
    expect(page.get_by_test_id("error-message")).to_contain_text("not this launch's token")
    screenshot(page, screenshots, "forbidden-token")
    context.close()

    signed_in = ui.open(browser)
    refused = signed_in.evaluate(
        "fetch('/act/ns/default/runs/any/abort', {method: 'POST'}).then(r => r.status)"
    )
    assert refused == 403  # signed in, but no CSRF token
    signed_in.context.close()


def test_the_timeline_advances_step_by_step_during_a_deploy_without_a_reload(
    ui: UiServer,
    browser: Browser,
    stack: Stack,
    kubectl: Kubectl,
    namespace: str,
    hold: Hold,
    screenshots: Path,
) -> None:
    ref, digest = publish(stack, "ui-held", text=held_workflow(hold.url + "/hold"))
    page = ui.open(browser, f"/ns/{namespace}/runs")
    following(page, "#runs-body")
    # The count of live updates is kept in an attribute, which `expect` reads with the
    # page's own selectors: a predicate string would need eval, which the CSP forbids.
    page.evaluate(
        "document.documentElement.dataset.updates = '0';"
        "document.addEventListener('plnt:updated', () => {"
        " const root = document.documentElement.dataset;"
        " root.updates = String(Number(root.updates) + 1); })"
    )
    apply(kubectl, namespace, workflowrun("held", ref, digest))
    row = page.locator('tr[data-run="held"]')
    expect(row).to_be_visible(timeout=10_000)  # the Runs page follows its watch
    link = row.get_by_role("link", name="held")
    # A live update changes the row in place: the link under the pointer stays the same
    # element, so a click across an update (mousedown before it, mouseup after) still
    # navigates. A replaced link would lose it, and no navigation would ever come.
    link.evaluate("a => { a.plntKept = true; }")
    updates = page.evaluate("document.documentElement.dataset.updates")
    kubectl.run("annotate", "-n", namespace, "wfr/held", "test.plnt.work/touched=yes")
    expect(page.locator("html")).not_to_have_attribute("data-updates", updates, timeout=10_000)
    assert link.evaluate("a => a.plntKept === true")
    link.click()
    page.wait_for_url(f"**/ns/{namespace}/runs/held")
    following(page, "[data-live]")
    page.evaluate("window.plntSamePage = true")

    step = page.locator("tr.step")
    expect(step.and_(page.locator('[data-step="smoke"]'))).to_have_attribute(
        "data-state", "Running", timeout=DEPLOY
    )
    for earlier in ("pull", "resolve", "install"):
        expect(page.locator(f'tr[data-step="{earlier}"]')).to_have_attribute(
            "data-state", "Succeeded"
        )
    expect(page.locator('tr[data-step="promote"]')).to_have_attribute("data-state", "Pending")
    screenshot(page, screenshots, "run-deploying")

    hold.release.set()
    expect(page.locator('tr[data-step="smoke"]')).to_have_attribute(
        "data-state", "Succeeded", timeout=DEPLOY
    )
    expect(page.locator('tr[data-step="promote"]')).to_have_attribute(
        "data-state", "Succeeded", timeout=DEPLOY
    )
    expect(page.get_by_test_id("phase")).to_have_text("Ready", timeout=DEPLOY)
    assert page.evaluate("window.plntSamePage") is True  # never reloaded
    page.context.close()


def test_an_invocation_made_from_the_cli_appears_in_the_log_within_2_s(
    ui: UiServer, browser: Browser, stack: Stack, ui_namespace: str, fan: str, screenshots: Path
) -> None:
    page = ui.open(browser, f"/ns/{ui_namespace}/runs/{fan}/invocations")
    following(page, "#invocations-body")
    before = page.locator("tr.invocation").count()
    command = [
        sys.executable, "-m", "plnt", "invoke", fan, "--input", "topic=raft",
        "--kubeconfig", str(stack.server.kubeconfig), "-n", ui_namespace,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    answered = time.monotonic()
    assert done.returncode == 0, done.stderr
    # A product requirement: the log shows it within 2 s of the CLI's answer.
    expect(page.locator("tr.invocation")).to_have_count(before + 1, timeout=2_000)
    assert time.monotonic() - answered < 2.5
    newest = page.locator("tr.invocation").first
    expect(newest.locator(".status")).to_have_text("200")
    expect(newest).to_have_attribute("data-revision", "2")
    expect(newest).to_contain_text("runner")  # per-hop timings
    expect(newest).to_contain_text("apiserver")

    page.locator("[data-filter-revision]").select_option("1")
    expect(newest).to_be_hidden()
    page.locator("[data-filter-revision]").select_option("")
    page.locator("[data-filter-errors]").check()
    expect(newest).to_be_hidden()
    page.locator("[data-filter-errors]").uncheck()
    expect(newest).to_be_visible()
    screenshot(page, screenshots, "invocations")
    page.context.close()


def test_a_schema_violation_in_the_invoke_form_shows_the_fields_message(
    ui: UiServer, browser: Browser, ui_namespace: str, fan: str, screenshots: Path
) -> None:
    page = ui.open(browser, f"/ns/{ui_namespace}/runs/{fan}/invoke")
    expect(page.locator('[data-field="topic"] .required')).to_be_visible()
    expect(page.locator("#in-audience")).to_have_value("engineers")  # the schema's default
    page.get_by_role("button", name="Invoke").click()
    message = page.locator('[data-error-for="topic"]')
    expect(message).to_be_visible(timeout=10_000)
    expect(message).to_contain_text("'topic' is a required property")
    expect(page.locator("#banner")).to_contain_text("422")

    page.locator("#in-topic").fill("etcd")
    page.get_by_role("button", name="Invoke").click()
    expect(page.locator("[data-invoke-output]")).to_contain_text('"topic": "etcd"', timeout=10_000)
    expect(message).to_be_hidden()
    expect(page.locator("[data-invoke-trace] tr.trace-step")).to_have_count(3)
    screenshot(page, screenshots, "invoke")
    page.context.close()


def test_a_bench_started_from_the_page_shows_its_progress_and_percentiles(
    ui: UiServer, browser: Browser, ui_namespace: str, fan: str, screenshots: Path
) -> None:
    page = ui.open(browser, f"/ns/{ui_namespace}/runs/{fan}/bench")
    following(page, "#bench-result")
    page.locator("#b-duration").fill("2")
    page.get_by_role("button", name="Start").click()
    expect(page.locator("#banner")).to_contain_text("started", timeout=10_000)
    expect(page.get_by_test_id("bench-phase")).to_have_text("Succeeded", timeout=DEPLOY)
    results = page.get_by_test_id("bench-results")
    expect(results.locator("tbody tr")).to_have_count(1)
    expect(page.locator("svg.chart rect")).to_have_count(4)  # p50, p90, p95, p99
    screenshot(page, screenshots, "bench")
    page.context.close()


def test_rollback_rolls_back_and_the_history_shows_the_new_revision(
    ui: UiServer, browser: Browser, ui_namespace: str, fan: str, screenshots: Path
) -> None:
    page = ui.open(browser, f"/ns/{ui_namespace}/runs")
    expect(page.locator(f'tr[data-run="{fan}"]')).to_contain_text("r2")
    screenshot(page, screenshots, "runs")
    page.goto(f"{ui.base}/ns/{ui_namespace}/runs/{fan}")
    following(page, "[data-live]")
    screenshot(page, screenshots, "run")
    dialogs: list[str] = []

    def accept(dialog: object) -> None:
        dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.accept()  # type: ignore[attr-defined]

    page.on("dialog", accept)
    page.get_by_role("button", name="Rollback to r1").click()
    expect(page.locator("#banner")).to_contain_text("rolling back to revision 1")
    assert dialogs and "revision 1" in dialogs[0]
    newest = page.locator('[data-testid="history"] tr[data-revision="3"]')
    expect(newest).to_contain_text("rollback to revision 1", timeout=DEPLOY)
    expect(newest).to_contain_text("promoted", timeout=DEPLOY)
    page.context.close()


def test_the_backends_page_shows_each_backends_transitions_as_they_happen(
    ui: UiServer,
    browser: Browser,
    kubectl: Kubectl,
    namespace: str,
    probing_worker: WorkerProcess,
    screenshots: Path,
) -> None:
    with threaded_llm(None) as llm:
        apply(kubectl, namespace, backend_manifest("flaky", "openai", endpoint=llm.url))
        page = ui.open(browser, f"/ns/{namespace}/backends")
        following(page, "#backends-body")
        events = page.locator('tr[data-backend-events="flaky"]')
        reachable = events.locator('tr[data-reason="BackendReachable"]')
        expect(reachable).to_be_visible(timeout=30_000)  # followed, never reloaded
        expect(reachable).to_contain_text("Normal")
        page.evaluate("window.plntSamePage = true")
    unreachable = events.locator('tr[data-reason="BackendUnreachable"]')
    expect(unreachable).to_be_visible(timeout=30_000)
    expect(unreachable).to_contain_text("Warning")
    expect(unreachable.locator("td.message")).to_contain_text(f"GET {llm.url}/models: ")
    expect(events.locator("tbody tr").first).to_have_attribute("data-reason", "BackendUnreachable")
    cells = unreachable.locator("td")
    expect(cells.nth(3)).to_have_text("1")  # count
    assert page.evaluate("window.plntSamePage") is True
    screenshot(page, screenshots, "backends-events")

    again = ui.open(browser, f"/ns/{namespace}/backends")  # the page as it arrives
    rows = again.locator('tr[data-backend-events="flaky"] tbody tr')
    expect(rows).to_have_count(2)
    page.context.close()
    again.context.close()


def test_switching_the_backend_starts_a_deploy(
    ui: UiServer,
    browser: Browser,
    stack: Stack,
    kubectl: Kubectl,
    namespace: str,
    ui_api: ThreadedApi,
    screenshots: Path,
) -> None:
    for name in ("echo-a", "echo-b"):
        apply(kubectl, namespace, backend_manifest(name, "echo", endpoint=None))
    ref, digest = publish(stack, "ui-switch")
    apply(kubectl, namespace, workflowrun("switch", ref, digest, backend={"name": "echo-a"}))
    wait_ready(ui_api, namespace, "switch")

    page = ui.open(browser, f"/ns/{namespace}/backends?run=switch")
    expect(page.get_by_test_id("current-backend")).to_have_text("echo-a")
    following(page, "#backends-body")
    screenshot(page, screenshots, "backends")
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator('tr[data-backend="echo-b"]').get_by_role("button").click()
    page.wait_for_url(f"**/ns/{namespace}/runs/switch", timeout=10_000)
    expect(page.locator("#run-summary")).to_contain_text("generation 2")
    following(page, "[data-live]")
    expect(page.locator("#run-summary")).to_contain_text("backend echo-b", timeout=DEPLOY)
    expect(page.get_by_test_id("phase")).to_have_text("Ready", timeout=DEPLOY)
    expect(page.locator('tr[data-step="promote"]')).to_have_attribute("data-state", "Succeeded")
    assert ui_api.get(namespace, "switch")["spec"]["backend"] == {"name": "echo-b"}
    page.context.close()


def test_a_user_without_rights_sees_the_403_message(
    stack: Stack, browser: Browser, tmp_path: Path, screenshots: Path
) -> None:
    created = subprocess.run(
        [sys.executable, "-m", "plnt", "token", "create", "nobody",
         "--state-dir", str(stack.state_dir)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    token = created.stdout.strip().splitlines()[-1]
    config = yaml.safe_load(stack.server.kubeconfig.read_text())
    config["users"] = [{"name": "nobody", "user": {"token": token}}]
    for context in config["contexts"]:
        context["context"]["user"] = "nobody"
    kubeconfig = tmp_path / "nobody.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    server = start_ui(kubeconfig)
    try:
        context = browser.new_context()
        page = context.new_page()
        answer = page.goto(server.url)
        assert answer is not None and answer.status == 403
        expect(page.locator("h1")).to_contain_text("403")
        expect(page.get_by_test_id("error-message")).to_contain_text('User "nobody" cannot list')
        screenshot(page, screenshots, "forbidden-rbac")
        context.close()
    finally:
        server.child.stop()


class ThreadGate(asyncio.Event):
    """The LLM stand-in's `hold_last`, released from this (Playwright's) thread: the
    stand-in awaits it on its own loop in another thread, where a plain asyncio.Event set
    from here would not wake it."""

    def __init__(self) -> None:
        super().__init__()
        self._released = threading.Event()

    async def wait(self) -> Literal[True]:
        await asyncio.to_thread(self._released.wait, 120)
        return True

    def set(self) -> None:
        self._released.set()

    def is_set(self) -> bool:
        return self._released.is_set()


def test_the_chat_panel_shows_tokens_as_they_stream_before_the_reply_completes(
    ui: UiServer,
    browser: Browser,
    stack: Stack,
    kubectl: Kubectl,
    namespace: str,
    ui_api: ThreadedApi,
    screenshots: Path,
) -> None:
    gate = ThreadGate()
    with threaded_llm(None) as llm:
        apply(
            kubectl,
            namespace,
            backend_manifest("llm", "vllm", endpoint=llm.url, models=["stand-in"]),
        )
        ref, digest = publish(stack, "ui-chat", text=CHAT.read_text())
        apply(kubectl, namespace, workflowrun("chat", ref, digest, backend={"name": "llm"}))
        wait_ready(ui_api, namespace, "chat")
        llm.hold_last = gate  # the reply's last token waits for the gate
        try:
            page = ui.open(browser, f"/ns/{namespace}/runs/chat/invoke")
            page.locator("[data-chat] input[name=message]").fill("tell me a story")
            page.get_by_role("button", name="Send").click()
            reply = page.locator("[data-chat-log] .bot")
            tokens = tokens_of("stand-in: tell me a story")
            # Every token but the last is shown while the last does not exist yet.
            expect(reply).to_have_text("".join(tokens[:-1]), timeout=10_000)
            assert not gate.is_set()
            gate.set()
            expect(reply).to_have_text("".join(tokens), timeout=10_000)
            expect(reply).not_to_have_class("failed")
            screenshot(page, screenshots, "chat")
            page.context.close()
        finally:
            gate.set()
