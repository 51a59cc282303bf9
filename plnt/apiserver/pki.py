"""The certificates a standalone plnt needs, made once and kept in the state directory.

A standalone server has no cluster to hand it a CA, so it makes its own: one CA for
serving and ordinary client certificates (the admin's kubeconfig), and a second,
separate CA for front-proxy (request-header) client certificates. They must be
separate because a certificate from the request-header CA lets its holder assert any
identity through `X-Remote-*` headers; sharing one CA would let every user do so.

Keys are EC P-256: key generation takes microseconds instead of the tens to hundreds of
milliseconds of RSA-2048, handshakes are cheaper, and Go's crypto/tls (kubectl) and
OpenSSL accept them everywhere plnt runs.

`ensure_pki` is idempotent: it loads what exists and creates only what is missing, so a
restart with the same state directory keeps the admin's kubeconfig valid. It re-issues
the serving certificate (never the CA) when requested SANs are missing or it nears
expiry.

Errors: `PkiError` (a damaged state directory: a certificate without its key, an
unreadable PEM); OS errors from the file system pass through unchanged.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY_DAYS = 3650
LEAF_VALIDITY_DAYS = 365
# Re-issue a leaf this long before it expires; also tolerate this much clock skew.
RENEW_BEFORE = datetime.timedelta(days=30)
BACKDATE = datetime.timedelta(minutes=5)

ADMIN_COMMON_NAME = "plnt-admin"
ADMIN_GROUP = "system:masters"
FRONT_PROXY_CLIENT_COMMON_NAME = "front-proxy-client"
LOOPBACK_SANS: tuple[str, ...] = ("127.0.0.1", "::1", "localhost")

# plnt makes EC keys; a CA brought by the operator may also be RSA.
PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


class PkiError(Exception):
    """The state directory holds PKI material that cannot be used."""


@dataclass(frozen=True, slots=True)
class Pki:
    """Where each PEM file of a standalone PKI lives."""

    directory: Path
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    front_proxy_ca_cert: Path
    front_proxy_ca_key: Path
    front_proxy_client_cert: Path
    front_proxy_client_key: Path

    @classmethod
    def at(cls, directory: Path) -> Pki:
        """The file layout under `directory` (nothing is read or written)."""
        return cls(
            directory=directory,
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "serving.crt",
            serving_key=directory / "serving.key",
            admin_cert=directory / "admin.crt",
            admin_key=directory / "admin.key",
            front_proxy_ca_cert=directory / "front-proxy-ca.crt",
            front_proxy_ca_key=directory / "front-proxy-ca.key",
            front_proxy_client_cert=directory / "front-proxy-client.crt",
            front_proxy_client_key=directory / "front-proxy-client.key",
        )

    @property
    def client_ca_files(self) -> list[Path]:
        """Every CA that may sign client certificates presented to the server."""
        return [self.ca_cert, self.front_proxy_ca_cert]


@dataclass(frozen=True, slots=True)
class CertificateAuthority:
    """A CA certificate with its private key, able to issue leaves."""

    certificate: x509.Certificate
    key: PrivateKey

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> CertificateAuthority:
        """Read a CA from PEM files."""
        return cls(certificate=_load_cert(cert_path), key=_load_key(key_path))

    @classmethod
    def create(cls, common_name: str, *, days: int = CA_VALIDITY_DAYS) -> CertificateAuthority:
        """A new self-signed CA that may sign leaves only (path length 0)."""
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = _now()
        public = key.public_key()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(public)
            .serial_number(_serial())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(certificate=certificate, key=key)

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


def issue_client_certificate(
    ca: CertificateAuthority,
    *,
    common_name: str,
    organizations: Sequence[str] = (),
    days: int = LEAF_VALIDITY_DAYS,
) -> tuple[bytes, bytes]:
    """A client certificate (CN = user name, O = groups) and its key, both PEM."""
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = _issue_leaf(
        ca,
        key=key,
        subject=x509.Name(subject),
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
        sans=(),
        days=days,
    )
    return certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_serving_certificate(
    ca: CertificateAuthority,
    *,
    sans: Iterable[str],
    common_name: str = "plnt-apiserver",
    days: int = LEAF_VALIDITY_DAYS,
) -> tuple[bytes, bytes]:
    """A server certificate for `sans` (IP literals become IP SANs, the rest DNS SANs)."""
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = _issue_leaf(
        ca,
        key=key,
        subject=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]),
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=tuple(sans),
        days=days,
    )
    return certificate.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def ensure_pki(directory: Path, *, extra_sans: Sequence[str] = ()) -> Pki:
    """Load the PKI under `directory`, creating whatever is missing."""
    pki = Pki.at(directory)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca = _ensure_ca(pki.ca_cert, pki.ca_key, common_name="plnt-ca")
    front_proxy_ca = _ensure_ca(
        pki.front_proxy_ca_cert, pki.front_proxy_ca_key, common_name="plnt-front-proxy-ca"
    )
    sans = _unique((*LOOPBACK_SANS, *extra_sans))
    if _serving_needs_issue(pki, ca=ca, sans=sans):
        _write_pair(pki.serving_cert, pki.serving_key, issue_serving_certificate(ca, sans=sans))
    if _client_needs_issue(pki.admin_cert, pki.admin_key):
        pair = issue_client_certificate(
            ca, common_name=ADMIN_COMMON_NAME, organizations=[ADMIN_GROUP]
        )
        _write_pair(pki.admin_cert, pki.admin_key, pair)
    if _client_needs_issue(pki.front_proxy_client_cert, pki.front_proxy_client_key):
        pair = issue_client_certificate(front_proxy_ca, common_name=FRONT_PROXY_CLIENT_COMMON_NAME)
        _write_pair(pki.front_proxy_client_cert, pki.front_proxy_client_key, pair)
    return pki


def san_strings(certificate: x509.Certificate) -> set[str]:
    """The DNS and IP SANs of a certificate, as strings."""
    try:
        ext = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    names: set[str] = set(ext.value.get_values_for_type(x509.DNSName))
    names.update(str(ip) for ip in ext.value.get_values_for_type(x509.IPAddress))
    return names


# --- internals ---------------------------------------------------------------------------


def _issue_leaf(
    ca: CertificateAuthority,
    *,
    key: PrivateKey,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    sans: tuple[str, ...],
    days: int,
) -> x509.Certificate:
    now = _now()
    not_after = min(
        now + datetime.timedelta(days=days), ca.certificate.not_valid_after_utc
    )  # a leaf never outlives its issuer
    public = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(public)
        .serial_number(_serial())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(san) for san in sans]), critical=False
        )
    return builder.sign(ca.key, hashes.SHA256())


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    # ECDSA keys sign; they never encipher keys, so key_encipherment stays off.
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _general_name(san: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(san))
    except ValueError:
        return x509.DNSName(san)


def _ensure_ca(cert_path: Path, key_path: Path, *, common_name: str) -> CertificateAuthority:
    if cert_path.exists() or key_path.exists():
        if not (cert_path.exists() and key_path.exists()):
            raise PkiError(f"{cert_path} and {key_path} must both exist or both be absent")
        return CertificateAuthority.load(cert_path, key_path)
    ca = CertificateAuthority.create(common_name)
    _write_pair(cert_path, key_path, (ca.cert_pem, _key_pem(ca.key)))
    return ca


def _serving_needs_issue(pki: Pki, *, ca: CertificateAuthority, sans: tuple[str, ...]) -> bool:
    if _client_needs_issue(pki.serving_cert, pki.serving_key):
        return True
    certificate = _load_cert(pki.serving_cert)
    if certificate.issuer != ca.certificate.subject:
        return True
    try:
        certificate.verify_directly_issued_by(ca.certificate)
    except (ValueError, TypeError, InvalidSignature):
        return True
    wanted = {str(_general_name(san).value) for san in sans}
    return not wanted <= san_strings(certificate)


def _client_needs_issue(cert_path: Path, key_path: Path) -> bool:
    """True when the pair is absent, incomplete, or close to expiry."""
    if not (cert_path.exists() and key_path.exists()):
        return True
    certificate = _load_cert(cert_path)
    return certificate.not_valid_after_utc - RENEW_BEFORE < _now()


def _write_pair(cert_path: Path, key_path: Path, pair: tuple[bytes, bytes]) -> None:
    cert_pem, key_pem = pair
    # Key first: a crash in between leaves a key without a certificate, which is re-issued.
    _write_atomically(key_path, key_pem, mode=0o600)
    _write_atomically(cert_path, cert_pem, mode=0o644)


def _write_atomically(path: Path, data: bytes, *, mode: int) -> None:
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)  # os.open's mode is filtered by the umask; be exact
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise


def _load_cert(path: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except ValueError as error:
        raise PkiError(f"{path} is not a PEM certificate: {error}") from error


def _load_key(path: Path) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as error:
        raise PkiError(f"{path} is not an unencrypted PEM private key: {error}") from error
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise PkiError(f"{path} holds a {type(key).__name__}; expected an EC or RSA key")
    return key


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _serial() -> int:
    # 159 random bits: positive and within the 20 octets RFC 5280 allows.
    return secrets.randbits(159) | 1


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(value for value in values if value))
