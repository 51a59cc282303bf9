"""Keys and a small certificate authority made for a test (`cryptography`), as PEM files.

`Keys(tmp_path)` writes what a publisher and a verifier need: `key_pair("alice")` an EC
P-256 private key and its public key; `ca("root")` a self-signed CA; `leaf(ca, "alice",
email=…)` a code-signing certificate that CA issued, valid from `not_before` to
`not_after` (an expired one is two days in the past). Nothing here signs an artifact:
that is plnt's code under test.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True)
class KeyPair:
    """A private key file and its public key file."""

    private: Path
    public: Path


@dataclass(frozen=True)
class Authority:
    """A CA: its certificate file and the key that signs what it issues."""

    certificate: Path
    key: ec.EllipticCurvePrivateKey
    name: x509.Name


@dataclass(frozen=True)
class Leaf:
    """A signing certificate and its private key file."""

    certificate: Path
    private: Path


class Keys:
    """Writes keys and certificates under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _private(self, name: str) -> tuple[ec.EllipticCurvePrivateKey, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        path = self.root / f"{name}.key"
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return key, path

    def key_pair(self, name: str) -> KeyPair:
        key, private = self._private(name)
        public = self.root / f"{name}.pub"
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return KeyPair(private, public)

    def ca(self, name: str, *, expired: bool = False) -> Authority:
        key, _ = self._private(f"{name}-ca")
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        start, end = _validity(expired, days=3650)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_usage(signing=False), critical=True)
            .sign(key, hashes.SHA256())
        )
        path = self.root / f"{name}-ca.pem"
        path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return Authority(path, key, subject)

    def leaf(self, ca: Authority, name: str, *, email: str, expired: bool = False) -> Leaf:
        key, private = self._private(name)
        start, end = _validity(expired, days=30)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.RFC822Name(email)]), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False
            )
            .add_extension(_usage(signing=True), critical=True)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca.key, hashes.SHA256())
        )
        path = self.root / f"{name}.pem"
        path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return Leaf(path, private)


def _validity(expired: bool, *, days: int) -> tuple[datetime.datetime, datetime.datetime]:
    if expired:
        return NOW - datetime.timedelta(days=days + 2), NOW - datetime.timedelta(days=2)
    return NOW - datetime.timedelta(hours=1), NOW + datetime.timedelta(days=days)


def _usage(*, signing: bool) -> x509.KeyUsage:
    """A leaf signs; a CA signs certificates and CRLs."""
    return x509.KeyUsage(
        digital_signature=signing,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=not signing,
        crl_sign=not signing,
        encipher_only=False,
        decipher_only=False,
    )
