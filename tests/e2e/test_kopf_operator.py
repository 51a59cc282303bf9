"""A real kopf operator against `plnt up`: it logs in from plnt's kubeconfig, handles a
PlntBackend and records an Event about it, as it would against kube-apiserver.

kopf posts core/v1 Events without `apiVersion` and `kind` in the body (kube takes a
built-in kind's from the URL), so it is the client that needs plnt to decode built-in
kinds as kube does (tests/apiserver/test_request_decoding_strict.py states the rule over
HTTP). The operator runs in a thread of its own with its own event loop, as `kopf run`
runs it in a process of its own: kopf treats every task of its loop as its own and
installs signal handlers only in the main thread. The server is the package's shared one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from plnt.client import PlntClient
from tests.e2e.manifests import backend_manifest
from tests.support.plnt_server import Kubectl, PlntServer
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

REASON = "BackendSeen"
HANDLED = "kopf.zalando.org/last-handled-configuration"
# kopf's one warning of a run outside the main thread; anything else it warns about is
# an answer of plnt's it did not expect.
OUTSIDE_MAIN_THREAD = "OS signals are ignored: running not in the main thread."


def connection_from(kubeconfig: Path) -> kopf.ConnectionInfo:
    """The current context of `kubeconfig` (plnt's inlines its CA and admin certificate)."""
    config = yaml.safe_load(kubeconfig.read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])
    user = next(u for u in config["users"] if u["name"] == context["context"]["user"])
    return kopf.ConnectionInfo(
        server=cluster["cluster"]["server"],
        ca_data=cluster["cluster"]["certificate-authority-data"],
        certificate_data=user["user"]["client-certificate-data"],
        private_key_data=user["user"]["client-key-data"],
        default_namespace=context["context"].get("namespace"),
    )


@dataclass
class Operator:
    """A kopf operator handling the PlntBackends of one namespace, in a thread of its own.

    Its only handler records an Event with `kopf.info` about each PlntBackend created.
    """

    kubeconfig: Path
    namespace: str
    seen: list[dict[str, Any]] = field(default_factory=list)
    stop_flag: threading.Event = field(default_factory=threading.Event)
    ready_flag: threading.Event = field(default_factory=threading.Event)
    failures: list[BaseException] = field(default_factory=list)
    thread: threading.Thread | None = None

    def registry(self) -> kopf.OperatorRegistry:
        registry = kopf.OperatorRegistry()

        @kopf.on.login(registry=registry)
        async def login(**_: Any) -> kopf.ConnectionInfo:
            return connection_from(self.kubeconfig)

        @kopf.on.create("plnt.work", "v1", "plntbackends", registry=registry)
        async def created(body: kopf.Body, **_: Any) -> None:
            self.seen.append(dict(body))
            kopf.info(body, reason=REASON, message=f"backend of type {body['spec']['type']}")

        return registry

    def _main(self) -> None:
        settings = kopf.OperatorSettings()
        settings.peering.standalone = True
        # Stopped by its flag: never a SIGKILL of this process as kopf's last resort.
        settings.process.ultimate_exiting_timeout = None
        try:
            asyncio.run(
                kopf.operator(
                    registry=self.registry(),
                    settings=settings,
                    namespaces=[self.namespace],
                    stop_flag=self.stop_flag,
                    ready_flag=self.ready_flag,
                )
            )
        except BaseException as error:  # the test reports it; a thread would only print it
            self.failures.append(error)
        finally:
            settings.execution.executor.shutdown(wait=True)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._main, name="kopf-operator")
        self.thread.start()

    def stop(self) -> None:
        self.stop_flag.set()
        assert self.thread is not None
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "the kopf operator did not stop within 30 s"
        assert not self.failures, self.failures


@contextlib.contextmanager
def running(kubeconfig: Path, namespace: str) -> Iterator[Operator]:
    """A started operator, stopped on exit; no thread of it outlives the block."""
    before = set(threading.enumerate())
    operator = Operator(kubeconfig, namespace)
    operator.start()
    try:
        yield operator
    finally:
        operator.stop()
    left = [thread for thread in threading.enumerate() if thread not in before]
    assert not left, f"threads the operator left running: {left}"


def complaints(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What kopf has warned about so far: every request it made (discovery, list, watch,
    patch, the Event) answered as it expects leaves none. A refused Event or patch is
    only a warning in kopf's log, never an exception."""
    return [
        record.getMessage()
        for record in list(caplog.records)
        if record.name.startswith("kopf")
        and record.levelno >= logging.WARNING
        and record.getMessage() != OUTSIDE_MAIN_THREAD
    ]


async def test_a_kopf_operator_records_an_event_about_the_plntbackend_it_handled(
    server: PlntServer, kubectl: Kubectl, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kopf")
    name = f"kopf-{uuid.uuid4().hex[:6]}"
    async with PlntClient.from_kubeconfig(server.kubeconfig, namespace=namespace) as client:
        path = client.object_path("plntbackends", name)

        async def recorded() -> list[dict[str, Any]]:
            assert not complaints(caplog), complaints(caplog)  # e.g. its Event refused
            events = await client.events_for(name, kind="PlntBackend")
            return [event for event in events if event.get("reason") == REASON]

        async def annotated() -> dict[str, Any] | None:
            backend: dict[str, Any] = (await client.request("GET", path)).json()
            return backend if HANDLED in (backend["metadata"].get("annotations") or {}) else None

        with running(server.kubeconfig, namespace) as operator:
            await eventually(
                lambda: operator.ready_flag.is_set() or operator.failures,
                within=30,
                what="the kopf operator to start",
            )
            assert not operator.failures, operator.failures
            created = await client.request(
                "POST",
                client.collection_path("plntbackends"),
                json=backend_manifest(name, namespace),
            )
            uid = created.json()["metadata"]["uid"]
            events = await eventually(recorded, within=30, what="kopf's Event stored in plnt")
            # kopf's merge patch of its own annotation: the handling cycle completed.
            handled = await eventually(annotated, within=30, what="kopf's annotation")

    assert [body["metadata"]["uid"] for body in operator.seen] == [uid]
    assert len(events) == 1
    event = events[0]
    assert (event["apiVersion"], event["kind"]) == ("v1", "Event")
    assert event["metadata"]["namespace"] == namespace
    assert event["metadata"]["name"].startswith("kopf-event-")
    assert event["involvedObject"] == {
        "apiVersion": "plnt.work/v1",
        "kind": "PlntBackend",
        "name": name,
        "namespace": namespace,
        "uid": uid,
    }
    assert event["type"] == "Normal"
    assert event["message"] == "backend of type echo"
    assert event["source"] == {"component": "kopf"}
    assert (event["reportingComponent"], event["reportingInstance"]) == ("kopf", "dev")
    assert event["action"] == "Action?"  # kopf's placeholder
    assert all(event[stamp] for stamp in ("eventTime", "firstTimestamp", "lastTimestamp"))
    last_handled = json.loads(handled["metadata"]["annotations"][HANDLED])
    assert last_handled == {"spec": created.json()["spec"]}

    assert not complaints(caplog), complaints(caplog)

    # What a kubectl user sees of it.
    described = kubectl.run("describe", "pb", name, "-n", namespace).stdout
    assert f"Normal  {REASON}" in described and "kopf" in described, described
    assert "backend of type echo" in described, described
