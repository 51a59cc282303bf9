"""`plnt up --model NAME`: a model server beside plnt, and the PlntBackend that names it.

Why in standalone: this is composition. The parts are elsewhere (the pins in
`plnt.processes.models`, the weights in `weights`, the child in `modelserver`, the API
client in `plnt.client`); `plnt up` only decides the order: check the name and the `llm`
extra before anything starts, start the server (its weights verified against plnt's pin
first), supervise it as etcd and Temporal are, and once the API server answers,
create or update its PlntBackend by server-side apply (field manager `plnt-up`), so a
WorkflowRun can name it (`spec.backend.name: NAME`) like any other backend.

In the state directory:

    DIR/models/NAME.log    the server's output
    DIR/models/NAME.port   the port it listened on last, reused by the next start: the
                           PlntBackend's endpoint, and the runners started with it (they
                           keep serving across plnt restarts), stay right
    DIR/models/NAME.pid    the running server's record (`plnt.processes.leftovers`)

A restart reuses the port unless another process holds it now (a model server left by an
earlier run does not: `reclaiming` stopped it first). Then the server gets a new port, a
warning line says so, and the PlntBackend applied once the API answers names the new
endpoint; runners deployed before the restart keep the old one until their run is
deployed again.

The PlntBackend: type `openai` (llama-cpp-python's server speaks the OpenAI API), the
server's endpoint, its one model, `capacity.maxConcurrency` 1 (the server generates for
one request at a time; a second waits for the first) and `metricsEndpoint` its
`/metrics`, where plnt's entry point for the server reports the requests running and
waiting (`plnt.processes.llamaserving`), so probes see its load.

Errors: those of `plnt.processes.models`, for the caller to report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
import time
from pathlib import Path
from typing import Any

from plnt.api import names
from plnt.client.clients import PlntClient
from plnt.processes import models, weights
from plnt.processes.modelserver import ModelServer

FIELD_MANAGER = "plnt-up"
NAMESPACE = "default"
MANAGED_BY = {"app.kubernetes.io/managed-by": "plnt-up"}

log = logging.getLogger("plnt.standalone")


def check(name: str) -> models.ModelPin:
    """The pin of `name`, once its model server and weights are known to be installed."""
    pin = models.pin_of(name)
    weights.require_extra(pin)
    return pin


async def start(pin: models.ModelPin, state_dir: Path) -> ModelServer:
    """Assemble the weights, then start the server on them (verified first) and wait until
    it serves; the port is remembered for the next start."""
    directory = state_dir / "models"
    directory.mkdir(parents=True, exist_ok=True)
    port_file = directory / f"{pin.name}.port"
    began = time.perf_counter()
    path = await weights.aassemble(pin)
    assembled = time.perf_counter() - began
    remembered, port = _remembered_port(port_file)
    server = ModelServer(pin, path, log_file=directory / f"{pin.name}.log", port=port)
    await server.astart()
    if remembered and server.port != remembered:
        log.warning(
            "the model server's port %d (of the last start) is taken: serving %s on %d, "
            "and its PlntBackend will name the new endpoint",
            remembered,
            pin.name,
            server.port,
        )
    if server.started is not None:  # the start-up line reports where the time went
        server.started = dataclasses.replace(server.started, assemble=assembled)
    port_file.write_text(f"{server.port}\n")
    return server


def _remembered_port(path: Path) -> tuple[int, int]:
    """The port in `path` (0 when none) and the one to ask for: the same when it is free
    now, else 0 (pick one).

    Probed as the server binds (uvicorn sets SO_REUSEADDR): connections the last server
    closed linger in TIME_WAIT on the port for a minute, which would refuse a plain bind
    although the server itself can listen there.
    """
    try:
        port = int(path.read_text().strip())
    except (OSError, ValueError):
        return 0, 0
    with socket.socket() as probe, contextlib.suppress(OSError):
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        return port, port
    return port, 0


def backend_of(server: ModelServer) -> dict[str, Any]:
    """The PlntBackend for the server (what `plnt up` applies)."""
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.BACKEND_KIND,
        "metadata": {"name": server.model, "namespace": NAMESPACE, "labels": MANAGED_BY},
        "spec": {
            "type": "openai",
            "endpoint": server.endpoint,
            "models": [server.model],
            "capacity": {"maxConcurrency": 1},
            "metricsEndpoint": f"{server.root}/metrics",
        },
    }


async def register(api: PlntClient, server: ModelServer) -> dict[str, Any]:
    """Create or update the server's PlntBackend; the object as stored."""
    return await api.apply_backend(
        backend_of(server), namespace=NAMESPACE, field_manager=FIELD_MANAGER
    )
