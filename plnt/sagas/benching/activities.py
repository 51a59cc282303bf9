"""The bench workflow's activities: measure with the harness, then record in status.

`measure` resolves each revision to one of its ready runners (from the run's
`status.traffic`, read through the API when the attempt starts, so a retried attempt
calls the runners that serve then), runs `plnt.harness.run` against their `/invoke`
directly (the API server is not in the measured path; the result's targets say so;
`/invoke?stream=true` when the spec asks for `stream`, so time to first token and tokens
per second come with the results) and heartbeats the harness's progress every
`BEAT_SECONDS`. A retried attempt reads the lost attempt's last heartbeat and starts the
measurement again (see `plnt.sagas.benching.workflow`).

`report` writes `status.lastBench` and `status.benchHistory` only while the run has
the uid the bench was started for (a JSON patch whose tests are the uid and the
resourceVersion, read again when one fails); an Event `BenchCompleted`/`BenchFailed` follows.
Both are idempotent: a bench already in the history is replaced, not added again.

Errors: `ApplicationError` of type `bench.NOT_MEASURABLE` (not retried) when the run or
a revision no longer serves or the load cannot be planned; anything else is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from plnt import harness
from plnt.api import names
from plnt.api.bench import BENCH_HISTORY
from plnt.api.events import event_about
from plnt.api.headers import BYPASS_HEADERS
from plnt.client import errors as client_errors
from plnt.client.clients import PlntClient
from plnt.processes import tasks
from plnt.sagas import statuswrites
from plnt.sagas import values as v
from plnt.sagas.benching import workflow as bench
from plnt.sagas.deploying.activities import DeployActivities
from plnt.sagas.speccache import SpecCache

BEAT_SECONDS = 1.0
COMPONENT = "plnt-bench"
MEASURED_PATH = "runner"
"""The bench calls a revision's runner directly: runner and backend time, no API hop."""


def _not_measurable(message: str) -> ApplicationError:
    return ApplicationError(message, type=bench.NOT_MEASURABLE, non_retryable=True)


def _endpoints_of(obj: dict[str, Any], revision: int) -> list[str]:
    for entry in (obj.get("status") or {}).get("traffic") or []:
        if isinstance(entry, dict) and entry.get("revision") == revision:
            return [str(e).rstrip("/") for e in entry.get("endpoints") or [] if e]
    return []


def _digest_of(obj: dict[str, Any], revision: int) -> str | None:
    for entry in (obj.get("status") or {}).get("traffic") or []:
        if isinstance(entry, dict) and entry.get("revision") == revision:
            return str(entry.get("digest") or "") or None
    return None


def _ref_of(obj: dict[str, Any], digest: str) -> str | None:
    """Where the spec of `digest` came from: its history record, else the spec's own ref."""
    status = obj.get("status") or {}
    for record in status.get("history") or []:
        if isinstance(record, dict) and record.get("digest") == digest and record.get("ref"):
            return str(record["ref"])
    workflow = (obj.get("spec") or {}).get("workflow") or {}
    return str(workflow["ref"]) if workflow.get("digest") == digest else None


def _plan(spec: dict[str, Any], inputs: list[Any]) -> harness.LoadPlan:
    try:
        return harness.LoadPlan(
            duration_seconds=float(spec["durationSeconds"]),
            warmup_seconds=float(spec.get("warmupSeconds") or 0.0),
            rate=float(spec["rate"]) if spec.get("rate") is not None else None,
            concurrency=int(spec["concurrency"]) if spec.get("concurrency") is not None else None,
            inputs=inputs,
            timeout_seconds=float(spec.get("timeoutSeconds") or 30.0),
        )
    except (harness.PlanError, KeyError, TypeError, ValueError) as error:
        raise _not_measurable(f"the bench cannot be planned: {error}") from error


def _progress_json(progress: harness.Progress) -> dict[str, Any]:
    return {
        "label": progress.label,
        "elapsedSeconds": round(progress.elapsed_seconds, 3),
        "requests": progress.requests,
        "errors": progress.errors,
        "p50Ms": round(progress.p50_ms, 3),
        "p99Ms": round(progress.p99_ms, 3),
    }


def _lost_note(details: Any, restarts: int) -> str:
    """What the lost attempt had done, from its last heartbeat (the restart's reason)."""
    if not restarts:
        return ""
    last = details if isinstance(details, dict) else {}
    done = last.get("progress") or []
    where = ""
    if done and isinstance(done[0], dict):
        where = f" at {float(done[0].get('elapsedSeconds') or 0.0):.1f} s of the measured phase"
    elif last:
        where = " during the warm-up"
    again = "time" if restarts == 1 else "times"
    return f"measurement started again {restarts} {again} after its worker was lost{where}"


class BenchActivities:
    """The bench's activities, bound to the worker's API client and spec cache."""

    def __init__(self, *, api: PlntClient, specs: SpecCache | None = None) -> None:
        self.api = api
        self.specs = specs

    @classmethod
    def sharing(cls, deploy: DeployActivities) -> BenchActivities:
        """Bench activities on the deploy activities' API client and spec cache (the worker
        closes them once, with the deploy's)."""
        return cls(api=deploy.api, specs=deploy.specs)

    def all(self) -> list[Any]:
        """Every activity, for `Worker(activities=...)`."""
        return [self.measure, self.report]

    async def _current(self, run: v.RunRef) -> dict[str, Any] | None:
        """The run's object, or None when it is gone or was recreated (another uid)."""
        try:
            obj = await self.api.get_workflowrun(run.name, namespace=run.namespace)
        except client_errors.NotFound:
            return None
        return obj if (obj.get("metadata") or {}).get("uid") == run.uid else None

    # -- measure --------------------------------------------------------------------

    async def _inputs(self, obj: dict[str, Any], spec: dict[str, Any], revision: int) -> list[Any]:
        """The request's inputs, else the run's smoke inputs, else the workflow's smoke case."""
        given = spec.get("inputs")
        if given is not None:
            return list(given) if isinstance(given, list) else [given]
        smoke = (((obj.get("spec") or {}).get("canary") or {}).get("smoke") or {}).get("input")
        if isinstance(smoke, dict):
            return [smoke]
        digest = _digest_of(obj, revision)
        ref = _ref_of(obj, digest) if digest else None
        if self.specs is not None and digest and ref:
            with contextlib.suppress(Exception):  # a spec that cannot be read: no default
                _, workflow = await self.specs.workflow(ref, digest)
                if workflow.smoke is not None and workflow.smoke.inputs is not None:
                    return [workflow.smoke.inputs]
        return [{}]

    async def _backend_metrics(self, obj: dict[str, Any]) -> str | None:
        """The PlntBackend's `metricsEndpoint` (GPU utilisation), when the run names one."""
        name = (obj.get("status") or {}).get("backend")
        if not name:
            return None
        path = self.api.object_path(
            names.BACKENDS, str(name), namespace=obj["metadata"]["namespace"]
        )
        try:
            backend = (await self.api.request("GET", path)).json()
        except client_errors.ClientError:
            return None  # the built-in echo backend, or one deleted since
        endpoint = (backend.get("spec") or {}).get("metricsEndpoint")
        return str(endpoint) if endpoint else None

    @activity.defn(name=bench.MEASURE_ACTIVITY)
    async def measure(self, request: bench.BenchRequest) -> bench.Measured:
        """Run the harness against the revisions' runners (see the module docstring)."""
        info = activity.info()
        restarts = info.attempt - 1
        lost = info.heartbeat_details[0] if info.heartbeat_details else None
        obj = await self._current(request.run)
        if obj is None:
            raise _not_measurable(f"workflowrun {request.run.name} is gone")
        endpoints: list[harness.Endpoint] = []
        targets: list[dict[str, Any]] = []
        backend_metrics = await self._backend_metrics(obj)
        query = "?stream=true" if request.spec.get("stream") else ""
        cache = "use" if request.spec.get("cache") == "use" else "bypass"
        headers = BYPASS_HEADERS if cache == "bypass" else {}
        for target in request.targets:
            ready = _endpoints_of(obj, target.revision)
            if not ready:
                raise _not_measurable(f"revision {target.revision} no longer has ready runners")
            url = ready[0]
            endpoints.append(
                harness.Endpoint(
                    label=target.label,
                    invoke_url=f"{url}/invoke{query}",
                    headers=headers,
                    runner_metrics_urls=(f"{url}/metrics",),
                    backend_metrics_url=backend_metrics,
                )
            )
            targets.append(
                {
                    "label": target.label,
                    "revision": target.revision,
                    "url": f"{url}/invoke{query}",
                    "path": MEASURED_PATH,
                    "replicas": len(ready),
                    "cache": cache,
                }
            )
        inputs = await self._inputs(obj, request.spec, request.targets[0].revision)
        plan = _plan(request.spec, inputs)
        async with self._beating(info.attempt, restarts) as latest:
            results = await harness.run(
                plan, endpoints, progress=lambda p: latest.__setitem__(p.label, p)
            )
        return bench.Measured(
            results=[result.to_json() for result in results],
            targets=targets,
            attempt=info.attempt,
            restarts=restarts,
            note=_lost_note(lost, restarts),
        )

    @contextlib.asynccontextmanager
    async def _beating(
        self, attempt: int, restarts: int
    ) -> AsyncIterator[dict[str, harness.Progress]]:
        """Heartbeat the latest progress per revision every `BEAT_SECONDS` while the block
        runs (the harness reports about once a second; the beat keeps the activity alive
        through the warm-up, which reports nothing)."""
        latest: dict[str, harness.Progress] = {}
        started = time.monotonic()

        def beat() -> None:
            activity.heartbeat(
                {
                    "attempt": attempt,
                    "restarts": restarts,
                    "elapsedSeconds": round(time.monotonic() - started, 3),
                    "progress": [_progress_json(p) for p in latest.values()],
                }
            )

        async def loop() -> None:
            while True:
                beat()
                await asyncio.sleep(BEAT_SECONDS)

        async with tasks.running(loop(), name="bench heartbeat"):
            yield latest

    # -- report ---------------------------------------------------------------------

    @activity.defn(name=bench.REPORT_ACTIVITY)
    async def report(self, report: bench.BenchReport) -> None:
        """Record the bench in the run's status, then the Event; a vanished run is no error."""
        run, record = report.run, report.record

        def ops(obj: dict[str, Any]) -> statuswrites.Patch:
            status = obj.get("status") or {}
            kept = [
                entry
                for entry in status.get("benchHistory") or []
                if isinstance(entry, dict) and entry.get("id") != record.get("id")
            ]
            history = [*kept, record][-BENCH_HISTORY:]
            # A JSON patch, not a merge patch: the record replaces the old one whole (a
            # merge would keep the old spec's keys beside the new ones).
            return [
                {"op": "add", "path": "/status/lastBench", "value": record},
                {"op": "add", "path": "/status/benchHistory", "value": history},
            ]

        path = self.api.object_path(
            names.WORKFLOWRUNS, run.name, namespace=run.namespace, subresource="status"
        )
        obj = await statuswrites.write_read(
            self.api, path, lambda: self._current(run), ops, attempts=10
        )
        if obj is None:
            return
        event = event_about(
            obj,
            type=report.event_type,
            reason=report.event_reason,
            message=report.event_message,
            component=COMPONENT,
        )
        path = f"/api/v1/namespaces/{run.namespace}/events"
        try:
            await self.api.request("POST", path, json=event)
        except (client_errors.Forbidden, client_errors.NotFound) as error:
            activity.logger.info("event %s not recorded: %s", report.event_reason, error)
