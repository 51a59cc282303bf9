"""The errors of talking to the cluster, drawn once.

* `ClusterError`: the base.
  * `ClusterUnavailable`: kube-apiserver did not answer, or answered with a failure
    (the message names the call and the cause). Callers never treat it as consent.
  * `ClusterConfigError`: the cluster's configuration cannot be used (no in-cluster
    service account and no kubeconfig; a kubeconfig that does not load).
"""

from __future__ import annotations

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException


class ClusterError(Exception):
    """Something went wrong talking to the cluster."""


class ClusterUnavailable(ClusterError):
    """kube-apiserver did not answer, or refused the call."""


class ClusterConfigError(ClusterError):
    """No usable way to reach the cluster."""


CALL_FAILURES: tuple[type[Exception], ...] = (
    ApiException,
    aiohttp.ClientError,
    TimeoutError,
    OSError,
)
"""What a kubernetes-asyncio call raises when kube-apiserver refuses it or cannot be reached."""


def unavailable(call: str, error: Exception) -> ClusterUnavailable:
    """`ClusterUnavailable` for a failed `call`, naming kube's answer or the transport error."""
    if isinstance(error, ApiException):
        return ClusterUnavailable(f"{call}: kube-apiserver answered {error.status} {error.reason}")
    return ClusterUnavailable(f"{call}: {type(error).__name__}: {error}".rstrip(": "))
