"""The `bench` subresource: start a durable load test of a run's revisions, read it back.

`POST …/workflowruns/{name}/bench` with a `Bench` (`{"spec": {"durationSeconds": 10,
"rate": 50, "revision": "canary"}}`, or `compare: [A, B]`; no body: every default) is
checked (`plnt.registry.workflowruns.bench`), the revisions are resolved against what
serves now, and the run's bench workflow is started through `BenchControl.start_bench`.
The answer is **202 Accepted** at once with the Bench: its id in `metadata.name`, the
spec with defaults filled in, `status.phase: Pending` and the revisions it measures. It
never waits for the measurement: kube-apiserver cuts non-long-running requests at 60 s,
and a bench may last an hour. `?dryRun=All` checks everything and starts nothing (200).

`GET …/workflowruns/{name}/bench` answers the current or last bench as a Bench: while it
runs, the phase, attempt and a progress snapshot per revision (from the measuring
activity's heartbeat: readable while no worker runs); when done, one result per revision
(the harness's JSON, as also written to `status.lastBench`). When Temporal no longer has
it (or cannot be reached), the answer comes from `status.lastBench`.

Authorization sees verb `create` or `get` on `workflowruns/bench`.

Errors (metav1.Status): 400 for a body that is not an object; 404 for an unknown run, or
a GET on a run never benched; 409 Conflict naming the phase when no revision is ready,
and naming the running bench when one runs; 422 Invalid naming each bad field; 503
ServiceUnavailable when the server runs without sagas or Temporal cannot be reached.
"""

from __future__ import annotations

import secrets
import string
from typing import Any

from aiohttp import web

from plnt.api import bench as wire
from plnt.api import errors
from plnt.api.meta import ObjectMeta, now_rfc3339
from plnt.apiserver import keys, params, responses
from plnt.apiserver.requestinfo import RequestInfo
from plnt.apiserver.workflowruns import keys as run_keys
from plnt.registry.definitions import Object, lookup
from plnt.registry.store import ResourceStore
from plnt.registry.workflowruns import bench as benches
from plnt.sagas.control import BenchControl, BenchRunning, DeployUnavailable

_ID_ALPHABET = string.ascii_lowercase + string.digits


def new_bench_id() -> str:
    """`bench-` and ten random characters: unique enough to name one bench for its run."""
    return "bench-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(10))


async def handle_bench(
    request: web.Request, store: ResourceStore, info: RequestInfo
) -> web.Response:
    if info.verb == "get":
        return await _read(request, store, info)
    if info.verb != "create":
        raise errors.MethodNotSupported.of(store.definition.group_resource, info.verb)
    return await _start(request, store, info)


def _control(request: web.Request, *, name: str) -> BenchControl:
    control = request.app[run_keys.DEPLOY]
    if not isinstance(control, BenchControl):
        raise errors.ServiceUnavailable(
            f"this API server runs without sagas: workflowrun {name} cannot be benched"
        )
    return control


async def _body(request: web.Request) -> Any:
    """The request's Bench as decoded JSON or YAML (None for an empty body)."""
    limit = request.app[keys.SETTINGS].max_request_body_bytes
    return await params.decode_optional(request, limit=limit)


async def _start(request: web.Request, store: ResourceStore, info: RequestInfo) -> web.Response:
    spec = benches.bench_spec(await _body(request), name=info.name)
    options = params.write_options(request.query, user_agent=request.headers.get("User-Agent", ""))
    obj = await store.get(info.namespace, info.name)
    control = _control(request, name=info.name)
    targets = benches.targets(obj, spec, name=info.name)
    now = now_rfc3339()
    bench = wire.Bench(
        metadata=ObjectMeta(name=new_bench_id(), namespace=info.namespace, creation_timestamp=now),
        spec=spec,
        status=wire.BenchStatus(
            phase="Pending",
            targets=[wire.BenchTarget(label=t.label, revision=t.revision) for t in targets],
            start_time=now,
        ),
    ).to_wire()
    if options.dry_run:
        bench["status"]["message"] = "dry run: checked, not started"
        return responses.json_response(bench, status=200)
    try:
        await control.start_bench(obj, bench)
    except BenchRunning as running:
        raise errors.Conflict.of(
            store.definition.group_resource,
            info.name,
            f"bench {running.bench_id} is running; GET …/bench follows it",
        ) from running
    except DeployUnavailable as error:
        raise errors.ServiceUnavailable(
            f"the bench of workflowrun {info.name} could not be started: {error}",
            retry_after_seconds=5,
        ) from error
    return responses.json_response(bench, status=202)


async def _read(request: web.Request, store: ResourceStore, info: RequestInfo) -> web.Response:
    obj = await store.get(info.namespace, info.name)
    control = request.app[run_keys.DEPLOY]
    view: dict[str, Any] | None = None
    if isinstance(control, BenchControl):
        try:
            view = await control.bench(obj)
        except DeployUnavailable as error:
            if lookup(obj, "status", "lastBench") is None:
                raise errors.ServiceUnavailable(
                    f"the bench of workflowrun {info.name} could not be read: {error}",
                    retry_after_seconds=5,
                ) from error
    if view is None:
        view = from_record(obj)
    if view is None:
        raise errors.NotFound(
            f'workflowrun "{info.name}" has no bench: POST …/workflowruns/{info.name}/bench'
            " starts one",
            name=info.name,
            group=store.definition.group,
            kind=store.definition.plural,
        )
    return responses.json_response(view)


def from_record(obj: Object) -> dict[str, Any] | None:
    """The run's last finished bench (`status.lastBench`) as a Bench, or None."""
    record = lookup(obj, "status", "lastBench")
    if not isinstance(record, dict) or not record.get("id"):
        return None
    return wire.from_record(record, namespace=lookup(obj, "metadata", "namespace"))
