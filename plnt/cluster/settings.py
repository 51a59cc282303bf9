"""What `plnt serve` was asked for (flags and environment, documented in docs/cluster.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """One `plnt serve` replica's settings, named as k8s.io/apiserver names its flags."""

    tls_cert_file: Path
    tls_private_key_file: Path
    etcd_servers: tuple[str, ...]
    etcd_cafile: Path | None = None
    etcd_certfile: Path | None = None
    etcd_keyfile: Path | None = None
    etcd_prefix: str = "/registry"
    bind_address: str = "0.0.0.0"
    secure_port: int = 6443
    temporal_address: str | None = None
    temporal_namespace: str = "default"
    temporal_tls_ca_file: Path | None = None
    temporal_tls_cert_file: Path | None = None
    temporal_tls_key_file: Path | None = None
    temporal_api_key_file: Path | None = None
    kubeconfig: Path | None = None
    """The cluster for Events; None: the pod's service account (in-cluster config)."""
    authentication_kubeconfig: Path | None = None
    """The cluster for TokenReview and the authentication ConfigMap; None: `kubeconfig`."""
    authorization_kubeconfig: Path | None = None
    """The cluster for SubjectAccessReview; None: `kubeconfig`."""
    token_cache_ttl: float = 10.0
    authorized_cache_ttl: float = 10.0
    unauthorized_cache_ttl: float = 10.0
    sagas: bool = True

    def files(self) -> dict[str, Path]:
        """Every file named by a flag, by the flag's name (checked before anything starts)."""
        named = {
            "--tls-cert-file": self.tls_cert_file,
            "--tls-private-key-file": self.tls_private_key_file,
            "--etcd-cafile": self.etcd_cafile,
            "--etcd-certfile": self.etcd_certfile,
            "--etcd-keyfile": self.etcd_keyfile,
            "--temporal-tls-ca-file": self.temporal_tls_ca_file,
            "--temporal-tls-cert-file": self.temporal_tls_cert_file,
            "--temporal-tls-key-file": self.temporal_tls_key_file,
            "--temporal-api-key-file": self.temporal_api_key_file,
            "--kubeconfig": self.kubeconfig,
            "--authentication-kubeconfig": self.authentication_kubeconfig,
            "--authorization-kubeconfig": self.authorization_kubeconfig,
        }
        return {flag: path for flag, path in named.items() if path is not None}
