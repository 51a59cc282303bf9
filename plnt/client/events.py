"""Events posted through the API a kubeconfig names, with repeats counted into one.

The worker writes Events through `plnt.client` as it writes status: standalone that is
plnt's own `/api/v1/.../events`, in a cluster kube-apiserver's (the worker's kubeconfig
names the cluster, as for every other request). `EventPoster.write` creates an Event, or,
for a repeat of one it wrote within `plnt.api.events.SERIES_WINDOW` (same object, type,
reason, message and source), counts it into that Event with a merge patch of `count`
and `lastTimestamp`, as client-go's correlator and `plnt.kube.events` do.

Errors are the client's (`plnt.client.errors`); an Event counted into that is gone
(expired, deleted) is written anew.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from plnt.api.events import EventCorrelator
from plnt.client import errors, transport
from plnt.client.clients import PlntClient


class EventPoster:
    """Writes core/v1 Events through `api`, counting repeats into one Event."""

    def __init__(self, api: PlntClient, *, correlator: EventCorrelator | None = None) -> None:
        self._api = api
        self._correlator = correlator or EventCorrelator()

    async def write(self, event: dict[str, Any]) -> None:
        """Create `event` (core/v1 JSON), or count it into the same recent Event."""
        namespace = str(event["metadata"]["namespace"])
        repeat = self._correlator.repeat_of(event)
        if repeat is not None:
            path = f"{_events_path(repeat.namespace)}/{quote(repeat.name, safe='')}"
            try:
                await self._api.request(
                    "PATCH", path, json=repeat.patch(), content_type=transport.MERGE_PATCH
                )
            except errors.NotFound:
                self._correlator.forget(event)
            else:
                self._correlator.remember(
                    event, namespace=repeat.namespace, name=repeat.name, count=repeat.count
                )
                return
        await self._api.request("POST", _events_path(namespace), json=event)
        self._correlator.remember(
            event, namespace=namespace, name=str(event["metadata"]["name"]), count=1
        )


def _events_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/events"
