"""The HTTP client of plnt's own API, for the CLI and for saga activities.

Contract: this package talks to plnt only over HTTP(S), configured by a
kubeconfig read with kubectl's rules (`kubeconfig`); it never imports storage or
the registry, so a worker can run anywhere. One `PlntClient` holds one aiohttp
session and may be shared by every coroutine of one event loop; close it with
`close()` or `async with`. Every failure is a `errors.ClientError`.

    async with PlntClient.from_kubeconfig(context="plnt") as client:
        run = await client.get_workflowrun("summarize")
"""

from plnt.client.clients import (
    InvokeResult,
    PlntClient,
    TimingHop,
    event_time,
    parse_server_timing,
)
from plnt.client.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    ClientError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeconfigError,
    NotFound,
    ServerError,
    TransportError,
    Unauthorized,
)
from plnt.client.kubeconfig import Connection, load
from plnt.client.transport import Response, WatchEvent

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "ClientError",
    "Conflict",
    "Connection",
    "Forbidden",
    "Gone",
    "Invalid",
    "InvokeResult",
    "KubeconfigError",
    "NotFound",
    "PlntClient",
    "Response",
    "ServerError",
    "TimingHop",
    "TransportError",
    "Unauthorized",
    "WatchEvent",
    "event_time",
    "load",
    "parse_server_timing",
]
