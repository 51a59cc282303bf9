"""One kubernetes-asyncio `ApiClient` for the cluster: in-cluster by default, or a kubeconfig.

As k8s.io/apiserver's delegating options do, authentication and authorization may each
name their own kubeconfig (`--authentication-kubeconfig`, `--authorization-kubeconfig`);
without one, the pod's service account (in-cluster config) is used.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException

from plnt.kube.errors import ClusterConfigError


async def configuration(kubeconfig: Path | None = None) -> client.Configuration:
    """The client configuration from `kubeconfig`, else from the in-cluster service account."""
    configured = client.Configuration()
    try:
        if kubeconfig is not None:
            await config.load_kube_config(
                config_file=str(kubeconfig), client_configuration=configured
            )
        else:
            await asyncio.to_thread(config.load_incluster_config, client_configuration=configured)
    except (ConfigException, OSError) as error:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster config"
        raise ClusterConfigError(f"cannot load the {where}: {error}") from error
    return configured


@contextlib.asynccontextmanager
async def api_client(kubeconfig: Path | None = None) -> AsyncIterator[client.ApiClient]:
    """An `ApiClient` for the cluster, closed on exit."""
    api = client.ApiClient(await configuration(kubeconfig))
    try:
        yield api
    finally:
        await api.close()
