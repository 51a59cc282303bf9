"""`PlntClient`: typed calls for the objects and subresources of `plnt.work/v1`.

Each method is one HTTP request (lists follow `continue` tokens) and answers the
decoded JSON the server sent, unchanged: callers that want models validate with
`plnt.api`. Namespaced calls default to the kubeconfig context's namespace.
Errors are those of `plnt.client.errors`.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

from plnt.api import codec, headers, names
from plnt.api.envelopes import invoke_envelope
from plnt.client import errors, kubeconfig, transport
from plnt.client.transport import Params, WatchEvent

GROUP_VERSION = names.API_VERSION
WORKFLOWRUNS = names.WORKFLOWRUNS
PLNTBACKENDS = names.BACKENDS
WORKFLOWS = names.WORKFLOWS
LIST_CHUNK = 500
NDJSON = "application/x-ndjson"
PROXIED_INVOKE = "proxy/invoke"
"""The runner's `/invoke` through the run's `proxy` subresource: long-running for
kube-apiserver, unlike the `invoke` subresource, so no request timeout cuts it."""


@dataclass(frozen=True, slots=True)
class TimingHop:
    """One `Server-Timing` entry: a hop name, its duration in ms, and a description."""

    name: str
    duration_ms: float | None = None
    description: str = ""


@dataclass(frozen=True, slots=True)
class InvokeResult:
    """The runner's answer to an invocation, and what the headers say about it."""

    body: Any
    revision: str | None
    cache: str | None
    timings: tuple[TimingHop, ...]

    @property
    def output(self) -> Any:
        """The workflow's output (the `output` field of the runner's answer)."""
        return self.body.get("output") if isinstance(self.body, dict) else self.body


def parse_server_timing(header: str) -> tuple[TimingHop, ...]:
    """`a;dur=1.5;desc="x", b;dur=2` as hops, in order; malformed parameters are ignored."""
    hops: list[TimingHop] = []
    for metric in header.split(","):
        name, *parameters = (part.strip() for part in metric.split(";"))
        if not name:
            continue
        duration: float | None = None
        description = ""
        for parameter in parameters:
            key, _, value = parameter.partition("=")
            value = value.strip().strip('"')
            if key.strip().lower() == "dur":
                try:
                    duration = float(value)
                except ValueError:
                    duration = None
            elif key.strip().lower() == "desc":
                description = value
        hops.append(TimingHop(name, duration, description))
    return tuple(hops)


class PlntClient(transport.Transport):
    """The plnt API: WorkflowRuns, their subresources, PlntBackends and Events."""

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig_path: str | os.PathLike[str] | None = None,
        *,
        context: str | None = None,
        namespace: str | None = None,
        timeout: float = 30.0,
    ) -> PlntClient:
        """A client for the server kubectl would use with the same flags and environment."""
        connection = kubeconfig.load(kubeconfig_path, context=context, namespace=namespace)
        return cls(connection, timeout=timeout)

    # --- paths -------------------------------------------------------------------------

    def collection_path(
        self, plural: str, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> str:
        """`/apis/plnt.work/v1[/namespaces/NS]/PLURAL`."""
        if all_namespaces:
            return f"/apis/{GROUP_VERSION}/{plural}"
        ns = quote(namespace or self.namespace, safe="")
        return f"/apis/{GROUP_VERSION}/namespaces/{ns}/{plural}"

    def object_path(
        self, plural: str, name: str, *, namespace: str | None = None, subresource: str = ""
    ) -> str:
        """`.../PLURAL/NAME[/SUBRESOURCE]`."""
        path = f"{self.collection_path(plural, namespace=namespace)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path

    # --- generic reads -----------------------------------------------------------------

    async def list_all(self, path: str, *, params: Params | None = None) -> list[dict[str, Any]]:
        """Every item of a collection, following `continue` tokens."""
        items: list[dict[str, Any]] = []
        query: dict[str, str | int | bool] = {**(params or {}), "limit": LIST_CHUNK}
        while True:
            page = (await self.request("GET", path, params=query)).json()
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            query["continue"] = token

    async def table(self, path: str, *, params: Params | None = None) -> dict[str, Any]:
        """The server's Table rendering of an object or a collection (what kubectl prints)."""
        reply = await self.request("GET", path, params=params, headers={"Accept": transport.TABLE})
        body: dict[str, Any] = reply.json()
        return body

    # --- WorkflowRuns ------------------------------------------------------------------

    async def get_workflowrun(self, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The WorkflowRun `name`."""
        path = self.object_path(WORKFLOWRUNS, name, namespace=namespace)
        return _object(await self.request("GET", path))

    async def list_workflowruns(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """WorkflowRuns of a namespace (or every namespace), optionally filtered."""
        params: dict[str, str | int | bool] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        path = self.collection_path(
            WORKFLOWRUNS, namespace=namespace, all_namespaces=all_namespaces
        )
        return await self.list_all(path, params=params)

    async def create_workflowrun(
        self, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        """Create a WorkflowRun (fails with AlreadyExists if the name is taken)."""
        path = self.collection_path(WORKFLOWRUNS, namespace=_namespace_of(body, namespace))
        return _object(await self.request("POST", path, json=body))

    async def apply_workflowrun(
        self,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str = "plnt",
        force: bool = True,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Create or update by server-side apply; the answer is the object as stored."""
        name = (body.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("the WorkflowRun has no metadata.name")
        params: dict[str, str | int | bool] = {"fieldManager": field_manager}
        if force:
            params["force"] = True
        if dry_run:
            params["dryRun"] = "All"
        path = self.object_path(WORKFLOWRUNS, name, namespace=_namespace_of(body, namespace))
        reply = await self.request(
            "PATCH", path, json=body, params=params, content_type=transport.APPLY_PATCH
        )
        return _object(reply)

    async def patch_workflowrun_status(
        self, name: str, patch: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        """Merge-patch the status subresource (`patch` is e.g. `{"status": {...}}`)."""
        path = self.object_path(WORKFLOWRUNS, name, namespace=namespace, subresource="status")
        reply = await self.request("PATCH", path, json=patch, content_type=transport.MERGE_PATCH)
        return _object(reply)

    async def get_scale(self, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The autoscaling/v1 Scale of a WorkflowRun."""
        path = self.object_path(WORKFLOWRUNS, name, namespace=namespace, subresource="scale")
        return _object(await self.request("GET", path))

    async def scale_workflowrun(
        self, name: str, replicas: int, *, namespace: str | None = None
    ) -> dict[str, Any]:
        """Set the desired replicas through the scale subresource; answers the Scale."""
        path = self.object_path(WORKFLOWRUNS, name, namespace=namespace, subresource="scale")
        patch = {"spec": {"replicas": replicas}}
        reply = await self.request("PATCH", path, json=patch, content_type=transport.MERGE_PATCH)
        return _object(reply)

    def invoke_paths(self, name: str, *, namespace: str | None = None) -> tuple[str, str]:
        """Where an invocation goes: the run's proxy to its runners' `/invoke`, then the
        `invoke` subresource for a caller the proxy refuses (see `invoke`)."""
        return (
            self.object_path(WORKFLOWRUNS, name, namespace=namespace, subresource=PROXIED_INVOKE),
            self.object_path(WORKFLOWRUNS, name, namespace=namespace, subresource="invoke"),
        )

    async def invoke(
        self,
        name: str,
        inputs: Mapping[str, Any],
        *,
        namespace: str | None = None,
        request_timeout: float | None = None,
        cache: headers.CacheMode = headers.CacheMode.USE,
    ) -> InvokeResult:
        """Run the workflow once with `inputs` on its promoted revision (`cache` bypass:
        without the runners' step cache, `Cache-Control: no-cache`).

        The call goes through the run's `proxy` subresource (`…/NAME/proxy/invoke`, the
        runner's own `POST /invoke`), which kube-apiserver treats as long-running, so a
        workflow may take longer than its request timeout (60 s) in a cluster. A caller
        who may not use the proxy (403: no `create` on `workflowruns/proxy`) is answered
        through `…/NAME/invoke` instead, which works the same but is cut at that limit
        in a cluster. Both answer the same body and headers (revision, cache,
        Server-Timing) and are logged as invocations.
        """
        body = invoke_envelope(dict(inputs))
        proxied, subresource = self.invoke_paths(name, namespace=namespace)
        sent = _cache_headers(cache)
        try:
            reply = await self.request(
                "POST", proxied, json=body, headers=sent, request_timeout=request_timeout
            )
        except errors.Forbidden:
            reply = await self.request(
                "POST", subresource, json=body, headers=sent, request_timeout=request_timeout
            )
        lowered = {key.lower(): value for key, value in reply.headers.items()}
        return InvokeResult(
            body=reply.json(),
            revision=lowered.get(headers.REVISION_HEADER.lower()),
            cache=lowered.get(headers.CACHE_HEADER.lower()),
            timings=parse_server_timing(lowered.get("server-timing", "")),
        )

    async def invoke_stream(
        self,
        name: str,
        inputs: Mapping[str, Any],
        *,
        namespace: str | None = None,
        request_timeout: float | None = None,
        on_headers: Callable[[Mapping[str, str]], None] | None = None,
        cache: headers.CacheMode = headers.CacheMode.USE,
    ) -> AsyncIterator[dict[str, Any]]:
        """Run the workflow once and yield the lines of its NDJSON stream as they arrive.

        Lines are `{"type": "step", "step": {...}}` as steps finish, then one last line
        `{"type": "result", ...}` (the body `invoke` answers) or `{"type": "error",
        "error": {...}, "status": N}`. A failure before the stream starts raises the
        `errors` tree as `invoke` does. `on_headers` is called once with the answer's
        headers (`X-Plnt-Revision` …) before the first line. The stream goes the way
        `invoke` goes: through the run's proxy, else (403) the `invoke` subresource.
        """
        body = codec.dumps(invoke_envelope(dict(inputs)))
        proxied, subresource = self.invoke_paths(name, namespace=namespace)
        limit = self.timeout if request_timeout is None else request_timeout
        path = proxied
        try:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    response = await stack.enter_async_context(
                        self._stream(path, body, limit, cache)
                    )
                except errors.Forbidden:
                    path = subresource
                    response = await stack.enter_async_context(
                        self._stream(path, body, limit, cache)
                    )
                if on_headers is not None:
                    on_headers(dict(response.headers))
                # Split by hand: readline() refuses lines over the read buffer, and a
                # result line holds the whole output.
                pending = bytearray()
                async for chunk in response.content.iter_any():
                    pending += chunk
                    end = pending.rfind(b"\n")
                    if end < 0:
                        continue
                    complete = bytes(pending[:end])
                    del pending[: end + 1]
                    for raw in complete.split(b"\n"):
                        if raw.strip():
                            yield _line(raw)
                if pending.strip():
                    yield _line(bytes(pending))
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as error:
            detail = (
                "timed out waiting for the server"
                if isinstance(error, TimeoutError)
                else (str(error) or type(error).__name__)
            )
            raise errors.TransportError(f"POST {path}: {detail}") from error

    @contextlib.asynccontextmanager
    async def _stream(
        self, path: str, body: bytes, limit: float, cache: headers.CacheMode
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """An NDJSON invocation stream that started (2xx); raises the `errors` tree else."""
        async with self._client_session().post(
            self.connection.server + path,
            params={"stream": "true"},
            data=body,
            headers={"Content-Type": transport.JSON, "Accept": NDJSON, **_cache_headers(cache)},
            timeout=aiohttp.ClientTimeout(total=limit),
            server_hostname=self.connection.tls_server_name,
        ) as response:
            if response.status >= 300:
                answer = transport.Response(
                    response.status, dict(response.headers), await response.read()
                )
                raise _api_error(answer)
            yield response

    async def invocation_log(self, name: str, *, namespace: str | None = None) -> Any:
        """Recent invocations of a WorkflowRun, as the server reports them (its invocation
        log, `…/invocationlog`)."""
        path = self.object_path(
            WORKFLOWRUNS, name, namespace=namespace, subresource="invocationlog"
        )
        return (await self.request("GET", path)).json()

    async def shadow_pairs(
        self, name: str, *, revision: int, namespace: str | None = None
    ) -> dict[str, Any]:
        """The shadow traffic pairs the answering API server holds for canary `revision`
        (`…/shadow`, a `WorkflowRunShadowList`)."""
        path = self.object_path(WORKFLOWRUNS, name, namespace=namespace, subresource="shadow")
        answer = await self.request("GET", path, params={"revision": str(revision)})
        return _object(answer)

    async def rollback(
        self, name: str, *, to_revision: int | None = None, namespace: str | None = None
    ) -> dict[str, Any]:
        """Return to `to_revision` (default: the previous one); answers the WorkflowRun."""
        path = self.object_path(WORKFLOWRUNS, name, namespace=namespace, subresource="rollback")
        body: dict[str, Any] = {} if to_revision is None else {"toRevision": to_revision}
        return _object(await self.request("POST", path, json=body))

    async def abort(self, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """Abort the deploy in progress; answers a metav1.Status."""
        return await self._steer(name, "abort", namespace=namespace)

    async def promote(self, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """End the canary's pause now, so it is promoted; answers a metav1.Status."""
        return await self._steer(name, "promote", namespace=namespace)

    async def retry(self, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """Try a failed deploy again now, not after its backoff; answers a metav1.Status."""
        return await self._steer(name, "retry", namespace=namespace)

    async def _steer(self, name: str, subresource: str, *, namespace: str | None) -> dict[str, Any]:
        path = self.object_path(WORKFLOWRUNS, name, namespace=namespace, subresource=subresource)
        return _object(await self.request("POST", path, json={}))

    async def watch_workflowrun(
        self,
        name: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Watch one WorkflowRun (`fieldSelector=metadata.name=NAME`) from `resource_version`."""
        params: dict[str, str | int | bool] = {"fieldSelector": f"metadata.name={name}"}
        if resource_version:
            params["resourceVersion"] = resource_version
        if timeout_seconds is not None:
            params["timeoutSeconds"] = timeout_seconds
        params["allowWatchBookmarks"] = True
        path = self.collection_path(WORKFLOWRUNS, namespace=namespace)
        async for event in self.watch(path, params=params):
            yield event

    # --- the workflow catalog -----------------------------------------------------------

    async def list_workflows(
        self, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[dict[str, Any]]:
        """The catalog's Workflows of a namespace (or every namespace)."""
        path = self.collection_path(WORKFLOWS, namespace=namespace, all_namespaces=all_namespaces)
        return await self.list_all(path)

    async def get_workflow(self, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """The catalog's Workflow `name`."""
        return _object(
            await self.request("GET", self.object_path(WORKFLOWS, name, namespace=namespace))
        )

    # --- PlntBackends and Events -------------------------------------------------------

    async def list_backends(
        self, *, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[dict[str, Any]]:
        """PlntBackends of a namespace (or every namespace)."""
        path = self.collection_path(
            PLNTBACKENDS, namespace=namespace, all_namespaces=all_namespaces
        )
        return await self.list_all(path)

    async def apply_backend(
        self,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str = "plnt",
        force: bool = True,
    ) -> dict[str, Any]:
        """Create or update a PlntBackend by server-side apply; the object as stored."""
        name = (body.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("the PlntBackend has no metadata.name")
        params: dict[str, str | int | bool] = {"fieldManager": field_manager}
        if force:
            params["force"] = True
        path = self.object_path(PLNTBACKENDS, name, namespace=_namespace_of(body, namespace))
        reply = await self.request(
            "PATCH", path, json=body, params=params, content_type=transport.APPLY_PATCH
        )
        return _object(reply)

    async def events_for(
        self, name: str, *, kind: str = "WorkflowRun", namespace: str | None = None
    ) -> list[dict[str, Any]]:
        """Events about one object, oldest first."""
        ns = namespace or self.namespace
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        path = f"/api/v1/namespaces/{quote(ns, safe='')}/events"
        events = await self.list_all(path, params={"fieldSelector": selector})
        return sorted(events, key=event_time)


def event_time(event: Mapping[str, Any]) -> str:
    """When an Event last happened, the key Events are ordered by: the series' last
    observation, else the last timestamp, the event time, the first timestamp, the
    object's creation ("" when it carries none of them)."""
    series = event.get("series") or {}
    return str(
        series.get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _namespace_of(body: Mapping[str, Any], namespace: str | None) -> str | None:
    declared = (body.get("metadata") or {}).get("namespace")
    return namespace or (declared if isinstance(declared, str) and declared else None)


def _api_error(answer: transport.Response) -> errors.ApiError:
    try:
        body = answer.json()
    except ValueError:
        body = None
    return errors.from_response(answer.status, body, answer.body.decode("utf-8", "replace"))


def _line(raw: bytes) -> dict[str, Any]:
    try:
        line = codec.loads(raw)
    except ValueError as error:
        raise errors.ServerError(f"malformed stream line: {raw[:200]!r}", code=502) from error
    if not isinstance(line, dict):
        raise errors.ServerError(f"malformed stream line: {raw[:200]!r}", code=502)
    return line


def _object(reply: transport.Response) -> dict[str, Any]:
    body = reply.json()
    return body if isinstance(body, dict) else {"value": body}


def _cache_headers(cache: headers.CacheMode) -> dict[str, str]:
    """What an invocation sends to say whether the runners' step cache may answer it."""
    return dict(headers.BYPASS_HEADERS) if cache is headers.CacheMode.BYPASS else {}
