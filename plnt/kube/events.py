"""Events in the cluster: what `kubectl describe` against kube-apiserver shows for plnt objects.

When plnt runs aggregated, its own `/api/v1/.../events` is not what users read: kube-
apiserver serves core/v1 Events itself. `ClusterEvents.write` posts each Event there,
and, as client-go's event correlator does (`plnt.api.events.EventCorrelator`), a repeat
of the same Event (same object, type, reason, message and source) within
`SERIES_WINDOW` is one Event whose `count` and `lastTimestamp` grow (a PATCH), not a new
object each time.
"""

from __future__ import annotations

from typing import Any, cast

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from plnt.api.events import REMEMBERED, SERIES_WINDOW, EventCorrelator
from plnt.kube.errors import ClusterUnavailable

__all__ = ["REMEMBERED", "SERIES_WINDOW", "ClusterEvents"]


class ClusterEvents:
    """Writes core/v1 Events to the cluster, counting repeats into one Event."""

    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)
        self._correlator = EventCorrelator()

    async def write(self, event: dict[str, Any]) -> None:
        """Create `event` (core/v1 JSON), or count it into the same recent Event."""
        namespace = str(event["metadata"]["namespace"])
        repeat = self._correlator.repeat_of(event)
        try:
            if repeat is not None:
                await self._core.patch_namespaced_event(
                    repeat.name, repeat.namespace, cast(Any, repeat.patch())
                )
                self._correlator.remember(
                    event, namespace=repeat.namespace, name=repeat.name, count=repeat.count
                )
                return
            await self._core.create_namespaced_event(namespace, cast(Any, event))
        except ApiException as error:
            if repeat is not None and error.status == 404:  # expired in the cluster
                self._correlator.forget(event)
                await self.write(event)
                return
            raise ClusterUnavailable(
                f"events: kube-apiserver answered {error.status} {error.reason}"
            ) from error
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise ClusterUnavailable(f"events: {error}") from error
        self._correlator.remember(
            event, namespace=namespace, name=str(event["metadata"]["name"]), count=1
        )
