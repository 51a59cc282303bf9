"""Every page renders every state the API's schema allows: no 500, and what the objects
hold shows up.

The objects are drawn from the API's own JSON Schema (`tests/ui/wire.py`), every optional
field present, null or absent, and kept only when the API's model accepts them. A fake
API serves them to the real UI app (`plnt.ui.app.build_app` with a real `PlntClient`),
which is read over HTTP as a browser would: the same handlers, views and templates. The
apps are started once per module and the objects swapped between examples, so an example
costs a few requests, not a server.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import markupsafe
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from plnt.api import (
    backends,
    bench,
    evaluations,
    events,
    invocations,
    slo,
    traces,
    workflowruns,
    workflows,
)
from plnt.client import Connection, PlntClient
from plnt.processes.ports import free_port
from plnt.ui import app
from plnt.ui.settings import UiSettings
from tests.ui import wire

NAMESPACE = "default"
RUN = "r"
EXAMPLES = settings(max_examples=40)
"""Per page: enough to reach each branch of its templates on two shared cores, in seconds."""

Obj = dict[str, Any]


def valid(model: type[BaseModel], **overrides: Any) -> Any:
    """Objects of `model` drawn from its schema that the API would also accept (a few
    rules, such as a scorer's one check, are the model's and not the schema's);
    `overrides` as `wire.objects` takes them."""

    def accepted(obj: Obj) -> bool:
        try:
            model.model_validate(obj)
        except ValidationError:
            return False
        return True

    return wire.objects(model, **overrides).filter(accepted)


def name_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def named(model: type[BaseModel]) -> Any:
    """Lists of `model`'s objects with distinct names, as one namespace holds them."""
    return st.lists(valid(model), max_size=3, unique_by=name_of)


def with_status(model: type[BaseModel], status: Any) -> Any:
    """Objects of `model` whose `status` is always drawn from `status`."""
    return st.builds(lambda obj, drawn: {**obj, "status": drawn}, valid(model), status)


def text(value: Any) -> str:
    """`value` as a template prints it, escaped."""
    return str(markupsafe.escape(value))


def number(value: Any) -> float | None:
    """A JSON number the page formats; None for anything else (booleans included)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


# -- the fake API and the UI in front of it ---------------------------------------------


def not_found(what: str) -> web.Response:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
              "code": 404, "message": f"{what} not found"}  # fmt: skip
    return web.json_response(status, status=404)


@dataclass
class Served:
    """What the fake API answers: one of each object, lists of the rest."""

    run: Obj = field(default_factory=lambda: {"metadata": {"name": RUN}, "spec": {}})
    events: list[Obj] = field(default_factory=list)
    invocations: list[Obj] = field(default_factory=list)
    invocation: Obj = field(default_factory=dict)
    backends: list[Obj] = field(default_factory=list)
    workflows: list[Obj] = field(default_factory=list)
    bench: Obj | None = None
    answer: Obj = field(default_factory=dict)
    """What the runner answers to an invoke (through the run's proxy)."""


def fake_api(served: Served) -> web.Application:
    plnt = f"/apis/plnt.work/v1/namespaces/{NAMESPACE}"

    def listing(items: list[Obj]) -> web.Response:
        return web.json_response({"kind": "List", "metadata": {}, "items": items})

    async def answer(request: web.Request) -> web.Response:
        path = request.path
        lists = {
            "/api/v1/namespaces": [{"metadata": {"name": NAMESPACE}}],
            f"/api/v1/namespaces/{NAMESPACE}/events": served.events,
            f"{plnt}/workflowruns": [served.run],
            f"{plnt}/invocations": served.invocations,
            f"{plnt}/plntbackends": served.backends,
            f"{plnt}/workflows": served.workflows,
        }
        if path in lists:
            return listing(lists[path])
        if path == f"{plnt}/workflowruns/{RUN}":
            return web.json_response(served.run)
        if path == f"{plnt}/workflowruns/{RUN}/proxy/v1/models":
            return web.json_response({"object": "list", "data": []})
        if path == f"{plnt}/workflowruns/{RUN}/proxy/invoke" and request.method == "POST":
            return web.json_response(served.answer)
        if path == f"{plnt}/workflowruns/{RUN}/bench":
            return not_found("bench") if served.bench is None else web.json_response(served.bench)
        if path.startswith(f"{plnt}/invocations/"):
            return web.json_response(served.invocation)
        if path.startswith(f"{plnt}/workflows/") and served.workflows:
            return web.json_response(served.workflows[0])
        return not_found(path)

    api = web.Application()
    api.router.add_get("/{tail:.*}", answer)
    api.router.add_post("/{tail:.*}", answer)
    return api


@dataclass
class Pages:
    """The UI app in front of the fake API, on one event loop kept across examples."""

    loop: asyncio.Runner
    served: Served
    api: TestServer
    ui: TestClient[web.Request, web.Application]
    settings: UiSettings

    def get(self, path: str, **served: Any) -> str:
        """The page at `path` with the API serving `served`; it must answer 200."""
        self.served.__dict__.update(Served().__dict__)
        self.served.__dict__.update(served)
        status, html = self.loop.run(self._get(path))
        assert status == 200, html
        return html

    async def _get(self, path: str) -> tuple[int, str]:
        answer = await self.ui.get(path)
        return answer.status, await answer.text()

    def post(self, path: str, body: Obj, **served: Any) -> Obj:
        """What the UI answers to an action posted as its pages do (CSRF token, Origin)."""
        self.served.__dict__.update(Served().__dict__)
        self.served.__dict__.update(served)
        status, answer = self.loop.run(self._post(path, body))
        assert status == 200, answer
        return answer

    async def _post(self, path: str, body: Obj) -> tuple[int, Obj]:
        answer = await self.ui.post(
            path,
            json=body,
            headers={
                "X-CSRF-Token": self.settings.csrf_token,
                "Origin": f"http://127.0.0.1:{self.settings.port}",
            },
        )
        return answer.status, await answer.json()


@pytest.fixture(scope="module")
def pages() -> Iterator[Pages]:
    with asyncio.Runner() as loop:

        async def start() -> Pages:
            served = Served()
            api = TestServer(fake_api(served), host="127.0.0.1")
            await api.start_server()
            settings = UiSettings(port=free_port())
            client = PlntClient(Connection(server=str(api.make_url("")), namespace=NAMESPACE))
            ui = TestClient(
                TestServer(app.build_app(settings, client), host="127.0.0.1", port=settings.port)
            )
            await ui.start_server()
            await ui.get(f"/?token={settings.token}", allow_redirects=False)
            return Pages(loop, served, api, ui, settings)

        started = loop.run(start())
        try:
            yield started
        finally:
            loop.run(started.ui.close())
            loop.run(started.api.close())


# -- the Run page ------------------------------------------------------------------------

evaluation_records = wire.objects(evaluations.EvaluationRecord)
runs = valid(workflowruns.WorkflowRun)
runs_with_a_gate = with_status(
    workflowruns.WorkflowRun,
    st.builds(
        lambda status, record: {**status, "lastEvaluation": record},
        valid(workflowruns.WorkflowRunStatus),
        evaluation_records,
    ),
)


def section(html: str, element: str) -> str:
    """The content of the element with `id="element"` (the page's cards are divs)."""
    start = html.index(f'id="{element}"')
    return html[start : html.index("</section>", start)]


def rows(html: str, attribute: str) -> list[str]:
    """Each table row carrying `attribute`, in order."""
    return [part.split("</tr>")[0] for part in html.split(f"<tr {attribute}=")[1:]]


def check_run_page(html: str, run: Obj, listed_events: list[Obj], listed: list[Obj]) -> None:
    status = run.get("status") or {}
    phase = status.get("phase") or "Pending"
    assert f'data-testid="phase">{text(phase)}<' in html
    conditions = section(html, "run-conditions")
    for condition in status.get("conditions") or []:
        assert f'data-condition="{text(condition["type"])}"' in conditions
    if not status.get("conditions"):
        assert "No conditions yet." in conditions
    timeline = section(html, "run-timeline")
    for step in status.get("saga") or []:
        assert f'data-step="{text(step["name"])}" data-state="{text(step["state"])}"' in timeline
    history = section(html, "run-history")
    for record in status.get("history") or []:
        assert f'data-revision="{record["revision"]}"' in history
    shown_events = section(html, "run-events")
    for event in listed_events:
        assert text(event.get("reason") or "") in shown_events
    if not listed_events:
        assert "No Events." in shown_events
    shown_invocations = section(html, "run-invocations")
    for invocation in listed:
        assert f'data-invocation="{text(name_of(invocation))}"' in shown_invocations
    check_gate(section(html, "run-evaluation"), status.get("lastEvaluation"))
    check_slo(section(html, "run-slo"), run)


def check_gate(html: str, record: Obj | None) -> None:
    """The quality gate card: each scorer's numbers, and a limit exactly when it is set."""
    if not record:
        assert "No evaluation has run" in html
        return
    assert text(record["message"]) in html
    assert ("passed" if record["passed"] else "failed") in html
    scorers = record.get("scorers") or []
    shown = rows(html, "data-scorer")
    assert len(shown) == len(scorers)
    for scorer, row in zip(scorers, shown, strict=True):
        assert row.startswith(f'"{text(scorer["name"])}"')
        limits = row.split("<td>")[-2]
        if scorer["type"] == "judge":
            wanted = number(scorer.get("minWinRate"))
            assert (f"win ≥ {wanted:.2f}" in limits) if wanted is not None else "≥" not in limits
            continue
        least, most = number(scorer.get("minPassRate")), number(scorer.get("maxRegression"))
        assert (f"≥ {least:.2f}" in limits) if least is not None else "≥" not in limits
        if most is not None:
            assert f"regression ≤ {most:.2f}" in limits
        else:
            assert "regression" not in limits
    cases = rows(html, "data-case")
    assert len(cases) == len(record.get("cases") or [])
    for case, row in zip(record.get("cases") or [], cases, strict=True):
        assert row.startswith(f'"{text(case["name"])}"')
        error = (case.get("canary") or {}).get("error")
        if error:
            assert text(error) in row


@EXAMPLES
@given(
    run=runs,
    listed_events=st.lists(valid(events.Event), max_size=3),
    listed=named(invocations.Invocation),
)
def test_the_run_page_renders_every_card_for_any_workflowrun(
    pages: Pages, run: Obj, listed_events: list[Obj], listed: list[Obj]
) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/runs/{RUN}", run=run, events=listed_events,
                     invocations=listed)  # fmt: skip
    check_run_page(html, run, listed_events, listed)


@EXAMPLES
@given(run=runs_with_a_gate)
def test_the_quality_gate_card_prints_each_limit_a_scorer_has_and_no_other(
    pages: Pages, run: Obj
) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/runs/{RUN}", run=run)
    check_gate(section(html, "run-evaluation"), run["status"]["lastEvaluation"])


# -- the SLO card --------------------------------------------------------------------------

OBJECTIVE_FIELDS = {
    "timeToFirstToken": "timeToFirstToken",
    "timePerOutputToken": "timePerOutputToken",
    "latency": "latency",
    "maxErrorRate": "errorRate",
    "minTokensPerSecond": "tokensPerSecond",
    "maxCostPerMillionTokens": "costPerMillionTokens",
}
"""`spec.slo`'s fields and the names `status.slo` judges them under (`plnt.api.slo`)."""

slo_statuses = wire.objects(slo.SLOStatus, name=st.sampled_from(slo.OBJECTIVE_NAMES) | wire.text)
"""`status.slo` whose objectives are mostly the ones a spec can state (and sometimes not)."""

runs_with_objectives = st.builds(
    lambda run, objectives, judged: {
        **run,
        "spec": {**run["spec"], "slo": objectives},
        "status": {**(run.get("status") or {}), "slo": judged},
    },
    runs,
    valid(slo.ServiceLevelObjectives),
    st.none() | slo_statuses,
)


def check_slo(html: str, run: Obj) -> None:
    """The SLO card: each objective `spec.slo` states, in order, with what `status.slo`
    measured of it; the calls (or "no calls yet"), the budget left and the cost."""
    stated = (run.get("spec") or {}).get("slo") or {}
    judged = (run.get("status") or {}).get("slo") or {}
    names = [name for field, name in OBJECTIVE_FIELDS.items() if stated.get(field) is not None]
    if not names:
        assert "No objectives" in html
        return
    shown = rows(html, "data-objective")
    assert [row.split('"')[1] for row in shown] == names
    measured = {o["name"]: o for o in judged.get("objectives") or []}
    for name, row in zip(names, shown, strict=True):
        objective = measured.get(name) or {}
        attainment = number(objective.get("attainment"))
        if attainment is not None:
            assert f"{attainment * 100:.1f}%" in row
        budget = number(objective.get("budgetRemaining"))
        assert (f"{budget * 100:.0f}%" in row) if budget is not None else "<svg" not in row
        met = objective.get("met")
        assert ("MISSED" in row) == (met is False)
        assert ("no samples" in row) == (met is None)
    calls = judged.get("calls")
    assert ("no calls yet" in html) == (not calls)
    if calls:
        assert f'data-testid="slo-calls">{calls} call' in html
    left = number(judged.get("errorBudgetRemaining"))
    if left is not None:
        assert f"{left * 100:.0f}%</strong>" in html
    cost = judged.get("cost")
    shown_cost = html[html.index('data-testid="slo-cost"') :]
    if cost:
        assert f"{cost['amount']:.4f} {text(cost['currency'])}" in shown_cost
    else:
        assert "No cost yet" in shown_cost


@EXAMPLES
@given(run=runs_with_objectives)
def test_the_slo_card_shows_each_objective_its_attainment_budget_and_cost(
    pages: Pages, run: Obj
) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/runs/{RUN}", run=run)
    check_slo(section(html, "run-slo"), run)


# -- step traces: the Invocation page and the invoke form's answer -----------------------

step_entries = wire.typed(traces.StepEntry, usage=wire.usages)
"""Trace entries as the runner writes them (`plnt.api.traces`)."""
step_traces = st.lists(
    step_entries | st.dictionaries(wire.text, wire.json_values, max_size=3), max_size=3
)
"""A trace: entries of the runner's shape, and open objects no runner writes (the API keeps
the trace as a list of open objects, so a page must take any)."""


def an_integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def objects_in(value: Any) -> list[Obj]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def check_trace(html: str, trace: Any) -> None:
    """Each step in order; under a tool loop each turn (final, resumed, tokens) and each
    tool call (name, arguments, ok/invalid/error, resumed); a map's items and failed items;
    a skipped step's reason."""
    steps = objects_in(trace)
    shown = html.split("<tbody data-trace-step=")[1:]
    assert len(shown) == len(steps)
    for step, part in zip(steps, shown, strict=True):
        assert part.startswith(f'"{text(step.get("id") or "")}"')
        skipped = step.get("skipped")
        assert ('data-testid="skipped-because"' in part) == (skipped is not None)
        if skipped:
            assert text(skipped) in part
        if an_integer(step.get("items")) is not None:
            assert f"{step['items']} item" in part
        failed = objects_in(step.get("failedItems"))
        assert part.count("<li data-failed-item=") == len(failed)
        for item in failed:
            assert text(item.get("error") or "") in part
        message = (
            (step.get("error") or {}).get("message")
            if isinstance(step.get("error"), dict)
            else None
        )
        if message:
            assert text(message) in part
        if an_integer(step.get("toolCalls")) is not None:
            assert f"{step['toolCalls']} tool call" in part
        turns = objects_in(step.get("turns"))
        shown_turns = part.split("<tr data-turn=")[1:]
        assert len(shown_turns) == len(turns)
        for turn, row in zip(turns, shown_turns, strict=True):
            first = row.split("</td>")[0]
            assert ("final</span>" in first) == (turn.get("final") is True)
            assert ("resumed</span>" in first) == (turn.get("resumed") is True)
            usage = turn.get("usage") if isinstance(turn.get("usage"), dict) else {}
            prompt, completion = (
                an_integer(usage.get("prompt_tokens")),
                an_integer(usage.get("completion_tokens")),
            )
            if prompt is not None and completion is not None:
                assert f"{prompt} + {completion} = " in row
            calls = objects_in(turn.get("toolCalls"))
            shown_calls = row.split('<div class="tool-call ')[1:]
            assert len(shown_calls) == len(calls)
            for call, div in zip(calls, shown_calls, strict=True):
                div = div.split("</td>")[0]
                outcome = "invalid" if call.get("invalid") is True else (
                    "ok" if call.get("ok") is True else "error")  # fmt: skip
                assert div.startswith(
                    f'call-{outcome}" data-tool-call="{text(call.get("id") or "")}"'
                )
                assert text(call.get("name") or "") in div
                if isinstance(call.get("arguments"), str):
                    assert text(call["arguments"]) in div
                assert ("resumed</span>" in div) == (call.get("resumed") is True)
                if isinstance(call.get("error"), str):
                    assert text(call["error"]) in div


@EXAMPLES
@given(invocation=valid(invocations.Invocation, trace=st.none() | step_traces))
def test_an_invocations_trace_shows_turns_tool_calls_items_and_skipped_steps(
    pages: Pages, invocation: Obj
) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/invocations/i", invocation=invocation)
    trace = (invocation.get("status") or {}).get("trace")
    if objects_in(trace):
        check_trace(html[html.index('data-testid="invocation-trace"') :], trace)
    else:
        assert 'data-testid="invocation-trace"' not in html and "No trace" in html


@EXAMPLES
@given(trace=step_traces)
def test_the_invoke_forms_answer_carries_the_trace_as_the_invocation_page_shows_it(
    pages: Pages, trace: list[Any]
) -> None:
    answer = pages.post(f"/act/ns/{NAMESPACE}/runs/{RUN}/invoke", {"values": {}},
                        answer={"output": "done", "trace": trace})  # fmt: skip
    assert answer["output"] == "done"
    check_trace(answer["traceHtml"], trace)


# -- the Invocation page and the Runs page ----------------------------------------------


@EXAMPLES
@given(invocation=valid(invocations.Invocation))
def test_an_invocations_page_renders_any_invocation(pages: Pages, invocation: Obj) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/invocations/i", invocation=invocation)
    status = invocation.get("status") or {}
    phase = status.get("phase") or "Pending"
    assert f'data-testid="invocation-phase">{text(phase)}<' in html
    error = status.get("error")
    if error:
        assert text(error["reason"]) in html and text(error.get("message") or "") in html
    else:
        assert 'data-testid="invocation-error"' not in html
    if status.get("output") is not None:
        assert 'data-testid="invocation-output"' in html
    for step in status.get("trace") or []:
        if isinstance(step.get("id"), str):
            assert text(step["id"]) in html
    assert f'run <a href="/ns/{NAMESPACE}/runs/{text(invocation["spec"]["workflowRun"])}"' in html


@EXAMPLES
@given(run=runs)
def test_the_runs_page_lists_any_workflowrun(pages: Pages, run: Obj) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/runs", run=run)
    phase = (run.get("status") or {}).get("phase") or "Pending"
    assert f'data-run="{text(name_of(run))}" data-phase="{text(phase)}"' in html


@EXAMPLES
@given(run=runs)
def test_the_invocation_log_page_renders_any_workflowrun(pages: Pages, run: Obj) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/runs/{RUN}/invocations", run=run)
    for record in (run.get("status") or {}).get("history") or []:
        assert f'<option value="{record["revision"]}">' in html


# -- the Backends page -------------------------------------------------------------------


@EXAMPLES
@given(
    listed=named(backends.PlntBackend),
    listed_events=st.lists(valid(events.Event), max_size=3),
    run=runs,
)
def test_the_backends_page_renders_any_backends(
    pages: Pages, listed: list[Obj], listed_events: list[Obj], run: Obj
) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/backends?run={RUN}", backends=listed,
                     events=listed_events, run=run)  # fmt: skip
    for backend in listed:
        row = html[html.index(f'<tr data-backend="{text(name_of(backend))}">') :]
        row = row.split("</tr>")[0]
        latency = (backend.get("status") or {}).get("latencyMilliseconds")
        assert (f"{latency} ms" if latency is not None else "—") in row
    if not listed:
        assert "No PlntBackends" in html


# -- the Bench page ----------------------------------------------------------------------

benches = with_status(
    bench.Bench,
    st.none()
    | st.builds(
        lambda status, results: {**status, "results": results},
        valid(bench.BenchStatus),
        wire.bench_results,
    ),
)


@EXAMPLES
@given(run=runs, current=st.none() | benches)
def test_the_bench_page_renders_any_bench_and_its_results(
    pages: Pages, run: Obj, current: Obj | None
) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/runs/{RUN}/bench", run=run, bench=current)
    result = html[html.index('id="bench-result"') :]
    if current is None:
        assert "has not been benched yet" in result
        return
    assert text((current.get("metadata") or {}).get("name") or "") in result
    status = current.get("status") or {}
    assert f'data-testid="bench-phase">{text(status.get("phase") or "Pending")}<' in result
    shown = result.split('data-testid="bench-results"')[-1]
    for measured in status.get("results") or []:
        label = measured.get("label")
        if isinstance(label, str):
            assert text(label) in shown
        p50 = number((measured.get("latency") or {}).get("p50Ms")) if isinstance(
            measured.get("latency"), Mapping) else None  # fmt: skip
        if p50 is not None:
            assert f"{p50:.1f} ms" in shown


# -- the Catalog page --------------------------------------------------------------------


@EXAMPLES
@given(listed=named(workflows.Workflow))
def test_the_catalog_page_renders_any_workflows(pages: Pages, listed: list[Obj]) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/catalog", workflows=listed)
    for workflow in listed:
        assert f'data-testid="workflow-{text(name_of(workflow))}"' in html
        for version in (workflow.get("spec") or {}).get("versions") or []:
            assert text(version["version"]) in html
        for problem in (workflow.get("status") or {}).get("versionErrors") or []:
            assert text(problem["reason"]) in html
    refreshed = [(w.get("status") or {}).get("lastRefreshTime") for w in listed]
    if not any(refreshed):
        assert "refreshed at" not in html
    if not listed:
        assert "No workflows in the catalog" in html
    assert not re.search(r"\bNone\b", html.split("<main>")[1])


@EXAMPLES
@given(workflow=valid(workflows.Workflow))
def test_the_deploy_page_renders_any_workflow(pages: Pages, workflow: Obj) -> None:
    html = pages.get(f"/ns/{NAMESPACE}/catalog/w/deploy", workflows=[workflow])
    deployable = workflows.latest(workflow)
    if deployable is not None and deployable.get("digest"):
        assert text(deployable["digest"]) in html.split('data-testid="run-manifest"')[1]
    else:
        assert 'data-testid="deploy-problem"' in html
