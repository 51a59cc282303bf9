"""Helm releases in the cluster, through the Helm SDK (helm-python-sdk: Helm 4 as a library).

The Kubernetes target installs each revision of a run as its own release, so `helm list`
and `helm history` show what plnt did. The SDK's calls block (a C library), so each
runs in a thread. Releases are stored the way the Helm CLI stores them (Secrets, by
default), in the release's namespace. Errors: `ReleaseError`, naming the release.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import helm_python

from plnt.kube.errors import ClusterError


class ReleaseError(ClusterError):
    """A Helm action failed; the message names the release and Helm's reason."""


class HelmReleases:
    """Install, upgrade, list and uninstall releases in one cluster."""

    def __init__(self, *, kubeconfig: Path | None = None, storage_driver: str = "secret") -> None:
        self._kubeconfig = kubeconfig
        self._storage = storage_driver
        self._configs: dict[str, helm_python.Config] = {}
        self._lock = threading.Lock()

    def _config(self, namespace: str) -> helm_python.Config:
        with self._lock:
            if namespace not in self._configs:
                self._configs[namespace] = helm_python.Config(
                    kubeconfig_path=str(self._kubeconfig) if self._kubeconfig else None,
                    namespace=namespace,
                    storage_driver=self._storage,
                )
            return self._configs[namespace]

    def _installed(self, namespace: str, name: str) -> dict[str, Any] | None:
        for release in self._config(namespace).list():
            if release.get("name") == name:
                return dict(release)
        return None

    def _apply(
        self, chart: str, namespace: str, name: str, values: dict[str, Any]
    ) -> dict[str, Any]:
        config = self._config(namespace)
        try:
            if self._installed(namespace, name) is None:
                release = config.install(chart, name, values, namespace=namespace)
            else:
                release = config.upgrade(chart, name, values, namespace=namespace)
        except helm_python.HelmError as error:
            raise ReleaseError(f"release {namespace}/{name}: {error}") from error
        return dict(release)

    async def apply(
        self, chart: str, *, namespace: str, name: str, values: dict[str, Any]
    ) -> dict[str, Any]:
        """Install the release, or upgrade it when it exists (a retried install adopts it)."""
        return await asyncio.to_thread(self._apply, chart, namespace, name, values)

    def _uninstall(self, namespace: str, name: str) -> bool:
        if self._installed(namespace, name) is None:
            return False
        try:
            self._config(namespace).uninstall(name)
        except helm_python.HelmError as error:
            raise ReleaseError(f"release {namespace}/{name}: {error}") from error
        return True

    async def uninstall(self, *, namespace: str, name: str) -> bool:
        """Remove the release and its objects; False when there was none (nothing to undo)."""
        return await asyncio.to_thread(self._uninstall, namespace, name)

    async def names(self, namespace: str) -> list[str]:
        """The releases in `namespace`."""

        def names() -> list[str]:
            return [str(r.get("name")) for r in self._config(namespace).list()]

        return await asyncio.to_thread(names)

    def close(self) -> None:
        with self._lock:
            for config in self._configs.values():
                config.close()
            self._configs.clear()
