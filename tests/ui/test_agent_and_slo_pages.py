"""In a browser: an agent's step trace (turns, tool calls, a map's failed item, a skipped
step), the Run page's SLO card, its quality gate card and its Invocations, as Chromium
shows them, kept as the screenshots `docs/ui.md` shows.

The objects are fixed, written as the API's writers write them (the runner's trace, the
API server's `status.slo`, the gate's `lastEvaluation`), so the pages show every part at
once; a small API on a loopback port serves them (lists, gets, and watches that stay open
with nothing new) to the real UI app, in a thread of its own, as the browser's pages
follow them live.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from playwright.sync_api import Browser, Locator, Page, expect

from plnt.client import Connection, PlntClient
from plnt.processes.ports import free_port
from plnt.ui import app
from plnt.ui.settings import UiSettings
from tests.support.browser import screenshot

NAMESPACE = "default"
RUN = "support-agent"
AGENT = "support-agent-7x2kq"
T0 = "2025-06-02T09:14:"

Obj = dict[str, Any]


def _saga() -> list[Obj]:
    steps = ["pull", "resolve", "install", "smoke", "evaluate", "canary", "promote"]
    return [
        {
            "name": name,
            "state": "Succeeded",
            "attempts": 1,
            "startTime": f"{T0}{10 + 6 * i:02d}Z",
            "endTime": f"{T0}{15 + 6 * i:02d}Z",
            "message": "",
        }
        for i, name in enumerate(steps)
    ]


def _objective(
    name: str,
    objective: float,
    measured: float,
    attainment: float | None,
    budget: float,
    *,
    percentile: float | None = 95.0,
    met: bool = True,
) -> Obj:
    return {
        "name": name,
        "objective": objective,
        "percentile": percentile,
        "measured": measured,
        "attainment": attainment,
        "met": met,
        "budgetRemaining": budget,
        "samples": 412,
    }


RUN_OBJECT: Obj = {
    "apiVersion": "plnt.work/v1",
    "kind": "WorkflowRun",
    "metadata": {
        "name": RUN,
        "namespace": NAMESPACE,
        "generation": 2,
        "creationTimestamp": "2025-06-02T08:00:00Z",
        "resourceVersion": "41",
    },
    "spec": {
        "workflow": {
            "ref": "oci://registry.example/support-agent:2.0.0",
            "digest": "sha256:" + "ab" * 32,
        },
        "backend": {"name": "gemma"},
        "slo": {
            "timeToFirstToken": {"percentile": 95, "milliseconds": 500},
            "timePerOutputToken": {"percentile": 95, "milliseconds": 60},
            "latency": {"percentile": 99, "milliseconds": 8000},
            "maxErrorRate": 0.01,
            "maxCostPerMillionTokens": 2.0,
            "windowSeconds": 3600,
        },
    },
    "status": {
        "phase": "Ready",
        "observedGeneration": 2,
        "revision": 2,
        "readyReplicas": 1,
        "backend": "gemma",
        "traffic": [{"revision": 2, "weight": 100, "endpoints": ["http://127.0.0.1:40213"]}],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Promoted",
                "message": "revision 2 takes all traffic",
            }
        ],
        "saga": _saga(),
        "history": [
            {
                "revision": 1,
                "digest": "sha256:" + "cd" * 32,
                "ref": "oci://registry.example/support-agent:1.0.0",
                "backend": "gemma",
                "promotedAt": "2025-06-01T16:02:11Z",
                "reason": "deployed",
            },
            {
                "revision": 2,
                "digest": "sha256:" + "ab" * 32,
                "ref": "oci://registry.example/support-agent:2.0.0",
                "backend": "gemma",
                "promotedAt": "2025-06-02T09:14:57Z",
                "reason": "deployed",
            },
        ],
        "lastEvaluation": {
            "passed": True,
            "revision": 2,
            "stableRevision": 1,
            "durationMilliseconds": 41250,
            "message": "every scorer passed: answers 0.92 ≥ 0.85; lookup-called 1.00; turns 1.00",
            "scorers": [
                {
                    "name": "answers",
                    "type": "contains",
                    "passed": True,
                    "canaryPassRate": 0.92,
                    "stablePassRate": 0.88,
                    "minPassRate": 0.85,
                    "maxRegression": 0.05,
                },
                {
                    "name": "lookup-called",
                    "type": "trajectory",
                    "passed": True,
                    "canaryPassRate": 1.0,
                    "stablePassRate": 0.75,
                    "minPassRate": 1.0,
                },
                {
                    "name": "turns",
                    "type": "trajectory",
                    "passed": True,
                    "canaryPassRate": 1.0,
                    "stablePassRate": 1.0,
                    "minPassRate": 1.0,
                },
            ],
            "cases": [
                {
                    "name": "order-status",
                    "canary": {
                        "output": "Order 1042 shipped on 2 June.",
                        "scores": [
                            {"scorer": "answers", "passed": True, "detail": "has shipped"},
                            {"scorer": "lookup-called", "passed": True, "detail": "once"},
                        ],
                    },
                    "stable": {
                        "output": "Your order shipped.",
                        "scores": [
                            {"scorer": "answers", "passed": True, "detail": "has shipped"},
                            {"scorer": "lookup-called", "passed": False, "detail": "none"},
                        ],
                    },
                },
            ],
        },
        "slo": {
            "windowSeconds": 3600,
            "calls": 412,
            "met": False,
            "errorBudgetRemaining": -0.38,
            "objectives": [
                _objective("timeToFirstToken", 500, 312.4, 0.9854, 0.708),
                _objective("timePerOutputToken", 60, 71.9, 0.931, -0.38, met=False),
                _objective("latency", 8000, 5210.0, 0.9976, 0.757, percentile=99),
                _objective("errorRate", 0.01, 0.0024, 0.9976, 0.757, percentile=None),
                _objective("costPerMillionTokens", 2.0, 0.31, None, 0.845, percentile=None),
            ],
            "cost": {
                "currency": "USD",
                "amount": 0.0412,
                "basis": "tokens",
                "inputTokens": 98120,
                "outputTokens": 35280,
                "perMillionTokens": 0.3088,
            },
            "backend": "gemma",
            "updatedAt": "2025-06-02T10:31:40Z",
        },
    },
}


def _call(ident: str, name: str, arguments: str, start: float, took: float, **more: Any) -> Obj:
    return {
        "id": ident,
        "name": name,
        "arguments": arguments,
        "startedMs": start,
        "durationMs": took,
        "ok": True,
        **more,
    }


TRACE: list[Obj] = [
    {
        "id": "route",
        "kind": "model",
        "startedMs": 0,
        "finishedMs": 402.1,
        "durationMs": 402.1,
        "backendMs": 398.7,
        "attempts": 1,
        "cache": "miss",
    },
    {
        "id": "escalate",
        "kind": "http",
        "startedMs": 402.3,
        "finishedMs": 402.3,
        "durationMs": 0,
        "backendMs": 0,
        "attempts": 0,
        "cache": "off",
        "skipped": "`when` is False: steps.route.output.category == 'complaint'",
    },
    {
        "id": "answer",
        "kind": "model",
        "startedMs": 402.4,
        "finishedMs": 2391.0,
        "durationMs": 1988.6,
        "backendMs": 1961.2,
        "attempts": 1,
        "cache": "off",
        "toolCalls": 3,
        "invalidToolCalls": 1,
        "turns": [
            {
                "turn": 1,
                "startedMs": 402.4,
                "durationMs": 655.0,
                "modelMs": 610.2,
                "final": False,
                "resumed": True,
                "usage": {"prompt_tokens": 412, "completion_tokens": 28},
                "toolCalls": [
                    _call("call_0", "lookup_order", '{"order": 1042}', 1012.8, 44.1, resumed=True)
                ],
            },
            {
                "turn": 2,
                "startedMs": 1057.5,
                "durationMs": 701.3,
                "modelMs": 640.7,
                "final": False,
                "usage": {"prompt_tokens": 488, "completion_tokens": 41},
                "toolCalls": [
                    _call(
                        "call_1",
                        "track_parcel",
                        '{"carrier": "dhl", "parcel": "JD0142"}',
                        1698.5,
                        58.9,
                    ),
                    _call(
                        "call_2",
                        "refund",
                        '{"order": "1042"}',
                        1698.5,
                        0.1,
                        ok=False,
                        invalid=True,
                        error="invalid arguments: $.order: '1042' is not of type 'integer'",
                    ),
                ],
            },
            {
                "turn": 3,
                "startedMs": 1758.9,
                "durationMs": 632.0,
                "modelMs": 631.4,
                "final": True,
                "usage": {"prompt_tokens": 601, "completion_tokens": 37},
                "toolCalls": [],
            },
        ],
    },
    {
        "id": "notify",
        "kind": "http",
        "startedMs": 2391.2,
        "finishedMs": 2502.9,
        "durationMs": 111.7,
        "backendMs": 108.0,
        "attempts": 1,
        "cache": "off",
        "items": 3,
        "failedItems": [{"index": 2, "error": "HTTP 503 from http://127.0.0.1:40551/notify"}],
    },
]


def _invocation(name: str, phase: str, start: str, end: str | None, **status: Any) -> Obj:
    return {
        "apiVersion": "plnt.work/v1",
        "kind": "Invocation",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "creationTimestamp": start,
            "resourceVersion": "50",
        },
        "spec": {"workflowRun": RUN, "inputs": {"question": "Where is my order 1042?"}},
        "status": {
            "phase": phase,
            "revision": 2,
            "startTime": start,
            **({"completionTime": end} if end else {}),
            **status,
        },
    }


INVOCATIONS: list[Obj] = [
    _invocation(
        AGENT,
        "Succeeded",
        "2025-06-02T10:30:02Z",
        "2025-06-02T10:30:05Z",
        attempts=2,
        endpoint="http://127.0.0.1:40213",
        output={
            "answer": "Order 1042 left on 2 June; DHL parcel JD0142 arrives tomorrow.",
            "category": "order",
        },
        message="resumed after the runner restarted: turn 1 was not asked again",
        usage={
            "promptTokens": 1501,
            "completionTokens": 106,
            "totalTokens": 1607,
            "source": "reported",
        },
        trace=TRACE,
    ),
    _invocation(
        "support-agent-p9w4d",
        "Failed",
        "2025-06-02T10:28:40Z",
        "2025-06-02T10:28:47Z",
        attempts=1,
        error={
            "reason": "StepFailed",
            "step": "answer",
            "message": "the tool loop took 6 turns (maxTurns 6) without a final answer",
        },
    ),
    _invocation(
        "support-agent-m3c8s",
        "Succeeded",
        "2025-06-02T10:25:11Z",
        "2025-06-02T10:25:13Z",
        attempts=1,
        usage={"promptTokens": 890, "completionTokens": 64, "totalTokens": 954},
    ),
]


def api_app() -> web.Application:
    """Lists, gets and watches of the objects above; a watch stays open and sends nothing."""
    plnt = f"/apis/plnt.work/v1/namespaces/{NAMESPACE}"
    lists: dict[str, list[Obj]] = {
        "/api/v1/namespaces": [{"metadata": {"name": NAMESPACE}}],
        f"/api/v1/namespaces/{NAMESPACE}/events": [],
        f"{plnt}/workflowruns": [RUN_OBJECT],
        f"{plnt}/invocations": INVOCATIONS,
        f"{plnt}/plntbackends": [],
    }
    objects = {f"{plnt}/workflowruns/{RUN}": RUN_OBJECT} | {
        f"{plnt}/invocations/{i['metadata']['name']}": i for i in INVOCATIONS
    }
    closing = asyncio.Event()

    async def answer(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "1"):
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await closing.wait()
            return response
        if request.path in lists:
            items = lists[request.path]
            selector = request.query.get("fieldSelector", "")
            if selector.startswith("metadata.name="):
                items = [i for i in items if i["metadata"]["name"] == selector.split("=", 1)[1]]
            return web.json_response(
                {"kind": "List", "metadata": {"resourceVersion": "60"}, "items": items}
            )
        if request.path in objects:
            return web.json_response(objects[request.path])
        return web.json_response(
            {
                "kind": "Status",
                "status": "Failure",
                "reason": "NotFound",
                "code": 404,
                "message": "not found",
            },
            status=404,
        )

    async def close(_: web.Application) -> None:
        closing.set()

    api = web.Application()
    api.router.add_get("/{tail:.*}", answer)
    api.on_shutdown.append(close)
    return api


@dataclass
class Served:
    """The API and the UI app on a loop of their own thread (Playwright's sync API holds
    the test's): the UI's base URL and launch token."""

    base: str
    token: str


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runners: list[web.AppRunner] = []

    async def start() -> Served:
        api = web.AppRunner(api_app())
        await api.setup()
        api_port = free_port()
        await web.TCPSite(api, "127.0.0.1", api_port).start()
        runners.append(api)
        settings = UiSettings(port=free_port())
        client = PlntClient(Connection(server=f"http://127.0.0.1:{api_port}", namespace=NAMESPACE))
        ui = web.AppRunner(app.build_app(settings, client), shutdown_timeout=1)
        await ui.setup()
        await web.TCPSite(ui, "127.0.0.1", settings.port).start()
        runners.append(ui)
        return Served(f"http://127.0.0.1:{settings.port}", settings.token)

    async def stop() -> None:
        for runner in reversed(runners):
            await runner.cleanup()
        # The pages' streams end with the UI's cleanup; what is left is cancelled here.
        left = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        await loop.shutdown_asyncgens()

    started: Future[Served] = asyncio.run_coroutine_threadsafe(start(), loop)
    try:
        yield started.result(timeout=30)
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


@pytest.fixture
def page(served: Served, browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.goto(f"{served.base}/?token={served.token}")
    try:
        yield opened
    finally:
        context.close()


def element_screenshot(element: Locator, directory: Path, name: str) -> None:
    """One card as `name`.png, in `directory` and in $PLNT_UI_SCREENSHOTS when set."""
    targets = [
        directory,
        *(
            [Path(os.environ["PLNT_UI_SCREENSHOTS"])]
            if os.environ.get("PLNT_UI_SCREENSHOTS")
            else []
        ),
    ]
    for target in targets:
        target.mkdir(parents=True, exist_ok=True)
        element.screenshot(path=str(target / f"{name}.png"))


def test_an_agents_trace_shows_its_turns_tool_calls_failed_item_and_skipped_step(
    page: Page, served: Served, screenshots: Path
) -> None:
    page.goto(f"{served.base}/ns/{NAMESPACE}/invocations/{AGENT}")
    trace = page.get_by_test_id("invocation-trace")
    expect(trace.locator("tr.trace-step")).to_have_count(4)
    agent = trace.locator('[data-trace-step="answer"]')
    expect(agent.locator("tr[data-turn]")).to_have_count(3)
    expect(agent.get_by_text("3 turns · 3 tool calls · 1 invalid")).to_be_visible()
    expect(agent.locator('tr[data-turn="3"]')).to_contain_text("final")
    expect(agent.locator('tr[data-turn="1"]')).to_contain_text("412 + 28 = 440 tokens")
    first = agent.locator('[data-tool-call="call_0"]')
    expect(first).to_contain_text('lookup_order({"order": 1042})')
    expect(first).to_contain_text("resumed")
    refused = agent.locator('[data-tool-call="call_2"]')
    expect(refused).to_have_class("tool-call call-invalid")
    expect(refused).to_contain_text("'1042' is not of type 'integer'")
    skipped = trace.locator('[data-trace-step="escalate"]')
    expect(skipped).to_contain_text("did not run: `when` is False")
    mapped = trace.locator('[data-trace-step="notify"]')
    expect(mapped).to_contain_text("3 items")
    expect(mapped.locator('[data-failed-item="2"]')).to_contain_text("HTTP 503")
    expect(page.locator("#invocation-detail")).to_contain_text("attempts 2")
    screenshot(page, screenshots, "invocation")
    element_screenshot(trace, screenshots, "agent-trace")


def test_the_run_page_shows_the_slo_card_the_quality_gate_and_the_invocations(
    page: Page, served: Served, screenshots: Path
) -> None:
    page.goto(f"{served.base}/ns/{NAMESPACE}/runs/{RUN}")
    card = page.get_by_test_id("slo")
    expect(card.locator("tr[data-objective]")).to_have_count(5)
    expect(card).to_contain_text("missed")
    expect(card.get_by_test_id("slo-calls")).to_have_text("412 calls")
    expect(card.get_by_test_id("slo-budget")).to_have_text("-38%")
    missed = card.locator('tr[data-objective="timePerOutputToken"]')
    expect(missed).to_contain_text("p95 ≤ 60 ms")
    expect(missed).to_contain_text("71.9 ms")
    expect(missed).to_contain_text("93.1%")
    expect(missed).to_contain_text("MISSED")
    expect(card.get_by_test_id("slo-cost")).to_contain_text("0.0412 USD")
    gate = page.get_by_test_id("evaluation")
    expect(gate.locator("tr[data-scorer]")).to_have_count(3)
    expect(gate.locator('tr[data-scorer="answers"]')).to_contain_text("regression ≤ 0.05")
    listed = page.locator("#run-invocations")
    expect(listed.locator("[data-invocation]")).to_have_count(3)
    expect(listed).to_contain_text("StepFailed")
    screenshot(page, screenshots, "run-objectives")
    element_screenshot(page.locator("section.card", has=card), screenshots, "slo-card")
    element_screenshot(page.locator("section.card", has=gate), screenshots, "quality-gate")
    element_screenshot(page.locator("section.card", has=listed), screenshots, "run-invocations")
