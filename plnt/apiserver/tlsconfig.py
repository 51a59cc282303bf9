"""TLS for the API server: one context that asks for client certificates, and the
post-handshake check that says which CA signed the one a client presented.

The server must *request* a client certificate without *requiring* one: kubectl with a
token, health probes and ServiceAccount clients send none. Python offers that as
`ssl.CERT_OPTIONAL`, which has a sharp edge: OpenSSL still verifies any certificate that
is sent, and a certificate from a CA outside the verify store fails the handshake (the
client sees a TLS alert, "unknown ca"). Go servers instead accept it and let the
authenticators ignore it. So every CA that may sign client certificates — the client CA
*and* the request-header (front-proxy) CA — is loaded into the store.

Because one store holds several CAs, a successful handshake does not say *which* of them
vouched for the peer, and that difference is the whole security of the front-proxy: only
the request-header CA may assert identities through headers. Python 3.11 has no public
`SSLObject.get_verified_chain()`, so `TrustBundle.verifies` re-checks the leaf from
`getpeercert(binary_form=True)` with `cryptography`: issued directly by a CA in the
bundle (signature), within its validity window, and carrying the clientAuth extended key
usage. A chain through an intermediate that the bundle does not contain is not followed.

Errors: `TrustBundleError` when a CA file cannot be read as PEM certificates.
"""

from __future__ import annotations

import datetime
import ssl
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

from plnt.apiserver import pki as pki_module


class TrustBundleError(Exception):
    """A CA bundle file is missing or holds no usable certificate."""


def server_ssl_context(pki: pki_module.Pki, *, client_ca_files: Sequence[Path]) -> ssl.SSLContext:
    """A TLS 1.2+ server context with plnt's serving certificate that requests client
    certificates and verifies them against every file in `client_ca_files`.

    Pass *every* CA that may sign client certificates (normally `pki.client_ca_files`):
    a certificate from any other CA fails the handshake.
    """
    # Not ssl.create_default_context(): for CLIENT_AUTH it loads the system's public CAs
    # into the verify store, letting any publicly issued certificate through the handshake.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile=pki.serving_cert, keyfile=pki.serving_key)
    context.verify_mode = ssl.CERT_OPTIONAL
    for ca_file in client_ca_files:
        context.load_verify_locations(cafile=ca_file)
    # aiohttp speaks HTTP/1.1 only; say so, so that Go clients never try h2.
    context.set_alpn_protocols(["http/1.1"])
    return context


# The parsed peer certificate of each TLS connection, parsed once per connection.
_PEER_CERTIFICATES: weakref.WeakKeyDictionary[ssl.SSLObject, x509.Certificate | None] = (
    weakref.WeakKeyDictionary()
)


def peer_ssl_object(request: web.Request) -> ssl.SSLObject | None:
    """The TLS state of the request's connection, or None for plain TCP."""
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    return ssl_object if isinstance(ssl_object, ssl.SSLObject) else None


def peer_certificate(request: web.Request) -> x509.Certificate | None:
    """The leaf certificate the client presented in the handshake, if any.

    It passed OpenSSL's verification against the union of all client CAs; use
    `TrustBundle.verifies` to learn whether a particular CA signed it.
    """
    ssl_object = peer_ssl_object(request)
    if ssl_object is None:
        return None
    try:
        return _PEER_CERTIFICATES[ssl_object]
    except KeyError:
        pass
    der = ssl_object.getpeercert(binary_form=True)
    certificate = x509.load_der_x509_certificate(der) if der else None
    _PEER_CERTIFICATES[ssl_object] = certificate
    return certificate


@dataclass(frozen=True, slots=True)
class _Verdict:
    certificate: x509.Certificate
    issued: bool
    not_before: datetime.datetime
    not_after: datetime.datetime


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True)
class TrustBundle:
    """The CA certificates of one trust purpose (client CA, or request-header CA)."""

    authorities: tuple[x509.Certificate, ...]
    source: str = ""
    # The verdict for a leaf: its issuer (None if this bundle did not issue it for client
    # authentication) and the window in which leaf and issuer are both valid. The same
    # certificate object arrives on every request of a connection (`peer_certificate`
    # caches it), so entries are keyed by identity: hashing a certificate costs as much
    # as the check itself. Each entry holds the certificate, so its id cannot be reused
    # while the entry lives. Only the time is re-checked per request.
    _verdicts: dict[int, _Verdict] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_pem(cls, pem: bytes, *, source: str = "") -> TrustBundle:
        """A bundle from concatenated PEM certificates."""
        try:
            authorities = tuple(x509.load_pem_x509_certificates(pem))
        except ValueError as error:
            raise TrustBundleError(f"no PEM certificate in {source or 'bundle'}") from error
        return cls(authorities=authorities, source=source)

    @classmethod
    def from_file(cls, path: Path) -> TrustBundle:
        """A bundle from a PEM file."""
        try:
            pem = path.read_bytes()
        except OSError as error:
            raise TrustBundleError(f"cannot read CA bundle {path}: {error}") from error
        return cls.from_pem(pem, source=str(path))

    def verifies(
        self, certificate: x509.Certificate, *, now: datetime.datetime | None = None
    ) -> bool:
        """True when a CA of this bundle issued `certificate` for client authentication
        and both are valid at `now`."""
        moment = now or datetime.datetime.now(datetime.UTC)
        verdict = self._verdicts.get(id(certificate))
        if verdict is None or verdict.certificate is not certificate:
            verdict = self._judge(certificate)
            if len(self._verdicts) >= _ISSUER_CACHE_SIZE:
                self._verdicts.clear()
            self._verdicts[id(certificate)] = verdict
        return verdict.issued and verdict.not_before <= moment <= verdict.not_after

    def _judge(self, certificate: x509.Certificate) -> _Verdict:
        issuer = self._find_issuer(certificate) if _is_for_client_auth(certificate) else None
        if issuer is None:
            return _Verdict(certificate, False, _EPOCH, _EPOCH)
        return _Verdict(
            certificate,
            True,
            max(certificate.not_valid_before_utc, issuer.not_valid_before_utc),
            min(certificate.not_valid_after_utc, issuer.not_valid_after_utc),
        )

    def _find_issuer(self, certificate: x509.Certificate) -> x509.Certificate | None:
        for authority in self.authorities:
            if authority.subject != certificate.issuer or not _is_ca(authority):
                continue
            try:
                certificate.verify_directly_issued_by(authority)
            except (ValueError, TypeError, InvalidSignature):
                continue
            return authority
        return None


_ISSUER_CACHE_SIZE = 4096


def _is_for_client_auth(certificate: x509.Certificate) -> bool:
    try:
        usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return False
    return ExtendedKeyUsageOID.CLIENT_AUTH in usages


def _is_ca(certificate: x509.Certificate) -> bool:
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    except x509.ExtensionNotFound:
        return False
    return constraints.value.ca
