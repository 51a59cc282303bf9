"""`kube-system/extension-apiserver-authentication`: the cluster's word on who may front plnt.

kube-apiserver publishes in this ConfigMap the CA of client certificates
(`client-ca-file`) and the front-proxy settings (`requestheader-client-ca-file`,
`requestheader-allowed-names`, `requestheader-*-headers`) that an aggregated API server
must honour. `AuthenticationConfigMap` reads it once (start-up fails without it) and
then follows it with a watch, handing every new version's `data` to a callback, so a
rotated front-proxy CA applies without a restart. Parsing the values is the caller's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import aiohttp
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from plnt.kube.errors import ClusterUnavailable

log = logging.getLogger("plnt.kube")

NAMESPACE = "kube-system"
NAME = "extension-apiserver-authentication"
WATCH_SECONDS = 300
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0

Data = dict[str, str]


class AuthenticationConfigMap:
    """Reads and follows the ConfigMap through one `ApiClient`."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._core = client.CoreV1Api(api)

    async def read(self) -> tuple[Data, str]:
        """The ConfigMap's data and resourceVersion; `ClusterUnavailable` naming the cause."""
        try:
            found = await self._core.read_namespaced_config_map(NAME, NAMESPACE)
        except ApiException as error:
            raise ClusterUnavailable(
                f"configmap {NAMESPACE}/{NAME}: kube-apiserver answered {error.status} "
                f"{error.reason}"
            ) from error
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise ClusterUnavailable(f"configmap {NAMESPACE}/{NAME}: {error}") from error
        return dict(found.data or {}), str(found.metadata.resource_version or "")

    async def follow(self, on_change: Callable[[Data], None], *, since: str) -> None:
        """Call `on_change` with each new version's data, until cancelled.

        A watch that ends is resumed from the last version seen; one that cannot be
        resumed (410 Gone, a network error) re-reads the ConfigMap, with backoff.
        """
        version, delay = since, RETRY_FIRST_SECONDS
        while True:
            try:
                version = await self._watch(on_change, version)
                delay = RETRY_FIRST_SECONDS
            except (ApiException, aiohttp.ClientError, TimeoutError, OSError) as error:
                log.warning("watch of %s/%s failed (%s); reading it again", NAMESPACE, NAME, error)
                await asyncio.sleep(delay)  # backoff before the next attempt
                delay = min(delay * 2, RETRY_MAX_SECONDS)
                try:
                    data, version = await self.read()
                except ClusterUnavailable as again:
                    log.warning("%s", again)
                    continue
                on_change(data)

    async def _watch(self, on_change: Callable[[Data], None], version: str) -> str:
        stream = watch.Watch()
        async with stream.stream(
            self._core.list_namespaced_config_map,
            NAMESPACE,
            field_selector=f"metadata.name={NAME}",
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
        ) as events:
            async for event in events:
                raw = event["raw_object"]
                version = str(raw.get("metadata", {}).get("resourceVersion") or version)
                if event["type"] in ("ADDED", "MODIFIED"):
                    on_change(dict(raw.get("data") or {}))
                elif event["type"] == "DELETED":
                    log.warning("%s/%s was deleted; keeping the last version", NAMESPACE, NAME)
        return version
