"""Events in the cluster: what `kubectl describe` against kube-apiserver shows for plnt objects.

When plnt runs aggregated, its own `/api/v1/.../events` is not what users read: kube-
apiserver serves core/v1 Events itself. `ClusterEvents.write` posts each Event there,
and, as client-go's event correlator does, a repeat of the same Event (same object,
type, reason, message and source) within `SERIES_WINDOW` is one Event whose `count` and
`lastTimestamp` grow (a PATCH), not a new object each time.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, cast

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from plnt.api.meta import now_rfc3339
from plnt.kube.errors import ClusterUnavailable

SERIES_WINDOW = 600.0
"""Seconds within which a repeat counts into the same Event (client-go: 10 minutes)."""
REMEMBERED = 4096
"""Distinct Events remembered for counting repeats (client-go's LRU is 4096 too)."""

Key = tuple[str, ...]


def _key(event: dict[str, Any]) -> Key:
    involved = event.get("involvedObject") or {}
    source = event.get("source") or {}
    return (
        str(involved.get("kind", "")),
        str(involved.get("namespace", "")),
        str(involved.get("name", "")),
        str(involved.get("uid", "")),
        str(event.get("type", "")),
        str(event.get("reason", "")),
        str(event.get("message", "")),
        str(source.get("component", "")),
    )


class ClusterEvents:
    """Writes core/v1 Events to the cluster, counting repeats into one Event."""

    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)
        # key → (namespace, name, count, monotonic time last written)
        self._seen: OrderedDict[Key, tuple[str, str, int, float]] = OrderedDict()

    async def write(self, event: dict[str, Any]) -> None:
        """Create `event` (core/v1 JSON), or count it into the same recent Event."""
        key, now = _key(event), time.monotonic()
        namespace = str(event["metadata"]["namespace"])
        previous = self._seen.get(key)
        try:
            if previous is not None and now - previous[3] < SERIES_WINDOW:
                _, name, count, _ = previous
                patch = {"count": count + 1, "lastTimestamp": now_rfc3339()}
                await self._core.patch_namespaced_event(name, namespace, cast(Any, patch))
                self._remember(key, namespace, name, count + 1, now)
                return
            await self._core.create_namespaced_event(namespace, cast(Any, event))
        except ApiException as error:
            if previous is not None and error.status == 404:  # expired in the cluster
                self._seen.pop(key, None)
                await self.write(event)
                return
            raise ClusterUnavailable(
                f"events: kube-apiserver answered {error.status} {error.reason}"
            ) from error
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise ClusterUnavailable(f"events: {error}") from error
        self._remember(key, namespace, str(event["metadata"]["name"]), 1, now)

    def _remember(self, key: Key, namespace: str, name: str, count: int, now: float) -> None:
        self._seen[key] = (namespace, name, count, now)
        self._seen.move_to_end(key)
        while len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
