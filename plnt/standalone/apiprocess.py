"""One more API process of `plnt up --workers N` (`python -m plnt.standalone.apiprocess
SETTINGS`): the API alone, on the port the parent listens on too.

The parent (`plnt.standalone.serving`, API process 0) keeps etcd, Temporal, the model
server, the deploy worker and the supervisors; a sibling serves the API with the same
`ServerSettings` (read from the JSON file `SETTINGS` in the server's private directory,
never pickle: the file is data, not code) and its own Temporal client, so that a
WorkflowRun written through it starts its saga as through the parent. Its slot
(`PLNT_WORKER_SLOT`) says which process it is; it exits with its parent
(`apiprocesses.die_with_parent`) and is served by the one serve sequence
(`plnt.apiserver.serving.serve`), which tells the parent once it listens.

Errors: exit code 1 with one line on stderr when it cannot start (etcd, Temporal or the
port did not answer); the parent logs the exit and starts it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from pathlib import Path

import pydantic

from plnt.apiserver import app as app_module
from plnt.apiserver import serving
from plnt.apiserver.settings import ServerSettings
from plnt.processes import apiprocesses, signals
from plnt.processes.exiting import exit_now
from plnt.sagas import starter
from plnt.sagas.control import DeployUnavailable

log = logging.getLogger("plnt.standalone.apiprocess")


@dataclasses.dataclass(frozen=True, slots=True)
class ApiProcessSettings:
    """What a sibling serves: the parent's `ServerSettings` and where Temporal is."""

    server: ServerSettings
    temporal_address: str | None = None
    temporal_namespace: str = "default"


_CODEC = pydantic.TypeAdapter(ApiProcessSettings)
"""The settings dataclasses as JSON and back (paths, tuples, nested settings), by pydantic
rather than by hand."""


def write(path: Path, settings: ApiProcessSettings) -> None:
    path.write_bytes(_CODEC.dump_json(settings))
    path.chmod(0o600)


def read(path: Path) -> ApiProcessSettings:
    return _CODEC.validate_json(path.read_bytes())


async def serve(
    settings: ApiProcessSettings, slot: apiprocesses.Slot, *, stop: asyncio.Event
) -> None:
    """Serve the API on the shared port until `stop` is set (the parent told once it
    listens)."""
    server_settings = dataclasses.replace(settings.server, slot=slot)
    control = None
    if settings.temporal_address is not None:
        client = await starter.connect(
            settings.temporal_address, namespace=settings.temporal_namespace
        )
        control = starter.TemporalDeployControl(client)
    application = app_module.build_app(server_settings, deploy=control)
    await serving.serve(
        application,
        host=server_settings.host,
        port=server_settings.port,
        ssl_context=app_module.ssl_context_for(server_settings),
        shutdown_timeout=2.0,
        handler_cancellation=True,
        stop=stop,
    )


def main(argv: list[str]) -> int:
    slot = apiprocesses.Slot.from_environment()
    if slot is None or len(argv) != 1:
        usage = "usage: PLNT_WORKER_SLOT=… python -m plnt.standalone.apiprocess SETTINGS"
        print(usage, file=sys.stderr)
        return 2
    apiprocesses.die_with_parent(slot.parent)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    settings = read(Path(argv[0]))
    try:
        signals.run_until_signalled(lambda stop: serve(settings, slot, stop=stop))
    except (serving.ServingError, DeployUnavailable) as error:
        print(f"error: worker {slot.index}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # As `plnt up`: no interpreter teardown after the Temporal SDK ran.
    exit_now(main(sys.argv[1:]))
