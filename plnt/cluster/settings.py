"""What `plnt serve` was asked for (flags and environment, documented in docs/cluster.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from plnt.apiserver.settings import CatalogSettings, ServingLimits
from plnt.processes.apiprocesses import Slot
from plnt.sagas.starter import TemporalConnection
from plnt.workflowspec.signers import SignaturePolicy


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
    temporal: TemporalConnection | None = None
    """None: no `--temporal-address` (only valid with `--no-sagas`)."""
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
    limits: ServingLimits = field(default_factory=ServingLimits)
    """`--max-requests-inflight`, `--max-mutating-requests-inflight`,
    `--idle-connection-timeout`."""
    catalog: CatalogSettings = field(default_factory=CatalogSettings)
    """`--catalog-sources`, `--catalog-refresh` (no sources file: an empty catalog)."""
    api_processes: int = 1
    """API server processes sharing `--secure-port` (`--workers`); 1: this process alone."""
    signatures: SignaturePolicy | None = None
    """`--trusted-signer`, `--require-signatures`: admission's signature policy."""
    child: Slot | None = None
    """Set in a sibling this replica's first API process started (`PLNT_WORKER_SLOT`): it
    serves its slot and starts no siblings of its own."""

    def files(self) -> dict[str, Path]:
        """Every file named by a flag, by the flag's name (checked before anything starts)."""
        named = {
            "--tls-cert-file": self.tls_cert_file,
            "--tls-private-key-file": self.tls_private_key_file,
            "--etcd-cafile": self.etcd_cafile,
            "--etcd-certfile": self.etcd_certfile,
            "--etcd-keyfile": self.etcd_keyfile,
            **(self.temporal.files() if self.temporal else {}),
            "--kubeconfig": self.kubeconfig,
            "--authentication-kubeconfig": self.authentication_kubeconfig,
            "--authorization-kubeconfig": self.authorization_kubeconfig,
            "--catalog-sources": self.catalog.sources_file,
        }
        return {flag: path for flag, path in named.items() if path is not None}
