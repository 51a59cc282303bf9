"""The stand-in cluster's certificates, made with plnt's PKI helpers and kept on disk.

Like a kubeadm cluster: one cluster CA that signs kube-apiserver's serving certificate
(SANs 127.0.0.1 and localhost) and ordinary client certificates (`client-ca-file`),
and a separate front-proxy CA (`requestheader-client-ca-file`) that signs the
aggregator's proxy client certificate, CN `front-proxy-client`. `rotate_front_proxy`
replaces the front-proxy CA and client certificate, as a CA rotation does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from plnt.apiserver import pki

FRONT_PROXY_CLIENT_CN = "front-proxy-client"


@dataclass(frozen=True, slots=True)
class ClusterPki:
    """Where each PEM of the stand-in cluster lives."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def ca_cert(self) -> Path:
        return self.path("ca.crt")

    @property
    def ca_key(self) -> Path:
        return self.path("ca.key")

    @property
    def serving_cert(self) -> Path:
        return self.path("apiserver.crt")

    @property
    def serving_key(self) -> Path:
        return self.path("apiserver.key")

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.path("front-proxy-ca.crt")

    @property
    def front_proxy_ca_key(self) -> Path:
        return self.path("front-proxy-ca.key")

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.path("front-proxy-client.crt")

    @property
    def front_proxy_client_key(self) -> Path:
        return self.path("front-proxy-client.key")

    def cluster_ca(self) -> pki.CertificateAuthority:
        return pki.CertificateAuthority.load(self.ca_cert, self.ca_key)

    def issue_client(
        self, name: str, groups: tuple[str, ...] = (), *, stem: str = ""
    ) -> tuple[Path, Path]:
        """A client certificate from the cluster CA (CN = user, O = groups) on disk."""
        cert_pem, key_pem = pki.issue_client_certificate(
            self.cluster_ca(), common_name=name, organizations=groups
        )
        stem = stem or name.replace(":", "_")
        return _write(self.path(f"{stem}.crt"), self.path(f"{stem}.key"), cert_pem, key_pem)


def _write(cert: Path, key: Path, cert_pem: bytes, key_pem: bytes) -> tuple[Path, Path]:
    key.write_bytes(key_pem)
    key.chmod(0o600)
    cert.write_bytes(cert_pem)
    return cert, key


def _key_pem(ca: pki.CertificateAuthority) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return ca.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def create(directory: Path) -> ClusterPki:
    """A new cluster CA, serving certificate, front-proxy CA and front-proxy client."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = ClusterPki(directory)
    ca = pki.CertificateAuthority.create("kubernetes")
    _write(paths.ca_cert, paths.ca_key, ca.cert_pem, _key_pem(ca))
    serving = pki.issue_serving_certificate(
        ca, sans=("127.0.0.1", "localhost", "kubernetes.default.svc"), common_name="kube-apiserver"
    )
    _write(paths.serving_cert, paths.serving_key, *serving)
    rotate_front_proxy(paths)
    return paths


def rotate_front_proxy(paths: ClusterPki) -> None:
    """A new front-proxy CA and a new front-proxy client certificate from it."""
    ca = pki.CertificateAuthority.create("front-proxy-ca")
    _write(paths.front_proxy_ca_cert, paths.front_proxy_ca_key, ca.cert_pem, _key_pem(ca))
    client = pki.issue_client_certificate(ca, common_name=FRONT_PROXY_CLIENT_CN)
    _write(paths.front_proxy_client_cert, paths.front_proxy_client_key, *client)
