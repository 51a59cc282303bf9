"""The errors of talking to the cluster, drawn once.

* `ClusterError`: the base.
  * `ClusterUnavailable`: kube-apiserver did not answer, or answered with a failure
    (the message names the call and the cause). Callers never treat it as consent.
  * `ClusterConfigError`: the cluster's configuration cannot be used (no in-cluster
    service account and no kubeconfig; a kubeconfig that does not load).
"""

from __future__ import annotations


class ClusterError(Exception):
    """Something went wrong talking to the cluster."""


class ClusterUnavailable(ClusterError):
    """kube-apiserver did not answer, or refused the call."""


class ClusterConfigError(ClusterError):
    """No usable way to reach the cluster."""
