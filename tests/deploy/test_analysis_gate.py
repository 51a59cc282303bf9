"""Bench as the canary gate, end to end: a slow canary is rolled back, a healthy one promoted.

Real kubectl, API server, Temporal and worker, real runner processes. The canary is made
slow by its workflow: its `http` step calls a loopback server (run on its own thread) that
answers after `SLOW_SECONDS`. The analysis is an open-loop bench of canary and stable
side by side (`spec.canary.analysis.rate`/`duration`), so the verdict can name the
canary's p95 against the limit and the stable's beside it. Assertions on latency are
lower bounds the server's delay sets, never on how fast this machine is.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.support.blocking_api import Api
from tests.support.manifests import apply, workflowrun
from tests.support.plnt_server import Kubectl, wait_for
from tests.support.stack import Stack, runner_pids_by_revision
from tests.support.statuses import condition_of, settled, step_of

SLOW_SECONDS = 0.3
LIMIT_MS = 150
GATE = {"rate": 20, "duration": 2, "maxP95Ms": LIMIT_MS, "maxErrorRate": 0.05}


@contextlib.contextmanager
def threaded_target() -> Iterator[str]:
    """A loopback server on its own thread: `GET /fast` answers at once, `/slow` late."""
    started = threading.Event()
    found: list[str] = []
    stopping: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def fast(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(SLOW_SECONDS)
        return web.json_response({"ok": True})

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/fast", fast)
        app.router.add_get("/slow", slow)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        stop = asyncio.Event()
        stopping.append((asyncio.get_running_loop(), stop))
        found.append(str(server.make_url("")).rstrip("/"))
        started.set()
        try:
            await stop.wait()
        finally:
            await server.close()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(timeout=30), "the target server did not start"
    try:
        yield found[0]
    finally:
        loop, stop = stopping[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)


def calling(url: str, version: str) -> str:
    """A spec that greets `inputs.who`, then calls `url` (not cached), with a smoke case."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: calling, version: "{version}"}}
inputs: {{type: object, properties: {{who: {{type: string}}}}, required: [who]}}
steps:
  - {{id: greet, kind: transform, template: "hello {{{{ inputs.who }}}}"}}
  - {{id: call, kind: http, needs: [greet], url: "{url}", retries: 0, timeoutSeconds: 10}}
output: '[steps.greet.output, steps.call.output]'
smoke:
  inputs: {{who: gate}}
  expect: {{contains: hello gate}}
"""


@contextlib.contextmanager
def live_traffic(stack: Stack, namespace: str, name: str) -> Iterator[list[str]]:
    """Invocations of the same inputs, one after another from a thread of their own, until
    the block ends; yields the revisions that answered them."""
    served: list[str] = []
    stop = threading.Event()

    def invoke_until_stopped() -> None:
        api = Api(stack.server.kubeconfig)  # its own loop and client: this is another thread
        try:
            while not stop.is_set():
                revision = api.invoke(namespace, name, {"who": "live"}).revision
                served.append(str(revision))
        finally:
            api.close()

    thread = threading.Thread(target=invoke_until_stopped, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        stop.set()
        thread.join(timeout=60)


def revision_settled(revision: int) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        return settled(obj) and obj["status"].get("revision") == revision

    return check


def test_a_bench_gate_rolls_a_slow_canary_back_and_promotes_a_healthy_one(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    with threaded_target() as target:
        ref_1, digest_1 = stack.spec("gate-1", text=calling(f"{target}/fast", "1"))
        apply(kubectl, namespace, workflowrun("gated", ref_1, digest_1))
        api.wait(namespace, "gated", revision_settled(1), message="revision 1 promoted")

        ref_2, digest_2 = stack.spec("gate-2", text=calling(f"{target}/slow", "2"))
        apply(kubectl, namespace, workflowrun("gated", ref_2, digest_2, canary={"analysis": GATE}))

        def degraded(obj: dict[str, Any]) -> bool:
            found = condition_of(obj, "Degraded")
            return settled(obj) and found is not None and found["status"] == "True"

        obj = api.wait(namespace, "gated", degraded, timeout=120, message="Degraded True")
        condition = condition_of(obj, "Degraded")
        assert condition is not None and condition["reason"] == "AnalysisFailed", condition
        measured = re.search(
            rf"p95 (\d+) ms > limit {LIMIT_MS} ms; stable (\d+) ms", condition["message"]
        )
        assert measured is not None, condition["message"]
        assert int(measured.group(1)) >= SLOW_SECONDS * 1000 * 0.9
        assert int(measured.group(1)) > int(measured.group(2))
        ready = condition_of(obj, "Ready")
        assert ready is not None and (ready["status"], ready["reason"]) == ("True", "RolledBack")
        assert (obj["status"]["revision"], obj["status"]["digest"]) == (1, digest_1)
        analyze, rollback = step_of(obj, "analyze"), step_of(obj, "rollback")
        assert analyze is not None and analyze["state"] == "Failed", analyze
        assert rollback is not None and rollback["state"] == "Compensated", rollback
        uid = obj["metadata"]["uid"]
        assert set(runner_pids_by_revision(stack.state_dir, uid=uid)) == {1}
        assert api.invoke(namespace, "gated", {"who": "x"}).revision == "1"

        # The same gate with a cache limit passes a fast canary, and says what it measured:
        # the analysis's own calls bypass the step cache (the canary is judged on its own
        # answers), so the hit rate is the live traffic's that the canary served meanwhile:
        # its transform step answers from the cache for every repeat of the same inputs.
        ref_3, digest_3 = stack.spec("gate-3", text=calling(f"{target}/fast", "3"))
        gate = {**GATE, "minCacheHitRate": 0.5}
        with live_traffic(stack, namespace, "gated") as served:
            apply(
                kubectl, namespace, workflowrun("gated", ref_3, digest_3, canary={"analysis": gate})
            )
            obj = api.wait(namespace, "gated", revision_settled(3), timeout=120, message="rev 3")
        assert "3" in served, sorted(set(served))  # the canary served live calls
        assert obj["status"]["digest"] == digest_3
        analyze = step_of(obj, "analyze")
        assert analyze is not None and analyze["state"] == "Succeeded", analyze
        message = analyze.get("message", "")
        assert "analysis passed: 40 requests at" in message, message
        assert f"<= limit {LIMIT_MS} ms; stable" in message, message
        hits = re.search(r"cache hit rate (\d\.\d\d) >= limit 0\.50", message)
        assert hits is not None and float(hits.group(1)) >= 0.5, message


SLO_MS = 150
SLO = {"latency": {"percentile": 95, "milliseconds": SLO_MS}}
SLO_GATE = {"rate": 20, "duration": 2}
"""The analysis's own limits left out: only the objective can fail the canary."""


def test_a_canary_that_misses_an_objective_is_rolled_back_as_slo_missed_with_its_own_event(
    stack: Stack, kubectl: Kubectl, api: Api, namespace: str
) -> None:
    with threaded_target() as target:
        ref_1, digest_1 = stack.spec("slo-1", text=calling(f"{target}/fast", "1"))
        apply(kubectl, namespace, workflowrun("held", ref_1, digest_1, slo=SLO))
        api.wait(namespace, "held", revision_settled(1), message="revision 1 promoted")

        ref_2, digest_2 = stack.spec("slo-2", text=calling(f"{target}/slow", "2"))
        apply(
            kubectl,
            namespace,
            workflowrun("held", ref_2, digest_2, slo=SLO, canary={"analysis": SLO_GATE}),
        )

        def degraded(obj: dict[str, Any]) -> bool:
            found = condition_of(obj, "Degraded")
            return settled(obj) and found is not None and found["status"] == "True"

        obj = api.wait(namespace, "held", degraded, timeout=120, message="Degraded True")
        condition = condition_of(obj, "Degraded")
        assert condition is not None and condition["reason"] == "SLOMissed", condition
        figures = rf"latency p95 (\d+) ms > objective {SLO_MS} ms at p95; stable ([\d.]+) ms"
        measured = re.search(figures, condition["message"])
        assert measured is not None, condition["message"]
        assert int(measured.group(1)) >= SLOW_SECONDS * 1000 * 0.9
        assert float(measured.group(2)) < int(measured.group(1))
        ready = condition_of(obj, "Ready")
        assert ready is not None and (ready["status"], ready["reason"]) == ("True", "RolledBack")
        assert (obj["status"]["revision"], obj["status"]["digest"]) == (1, digest_1)
        analyze = step_of(obj, "analyze")
        assert analyze is not None and analyze["state"] == "Failed", analyze
        assert set(runner_pids_by_revision(stack.state_dir, uid=obj["metadata"]["uid"])) == {1}

        def slo_event() -> dict[str, Any] | None:
            for event in api.events(namespace, "held"):
                if event.get("reason") == "SLOMissed":
                    return event
            return None

        event = wait_for(slo_event, timeout=30, message="a SLOMissed Event")
        assert event["type"] == "Warning", event
        assert re.search(figures, event["message"]) is not None, event["message"]
