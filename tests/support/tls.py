"""TLS helpers for tests: a throwaway PKI, client certificates on disk, client SSL
contexts, and a real HTTPS aiohttp server on a free loopback port.

Reuse from any test module:

    from tests.support import tls

    async def test_x(tmp_path):
        pki = ensure_pki(tmp_path / "pki")
        async with tls.serve_https(app, tls.server_context(pki)) as base_url:
            async with tls.client_session(pki, cert=tls.admin(pki)) as session:
                ...
"""

from __future__ import annotations

import contextlib
import datetime
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from plnt.apiserver import pki as pki_module
from plnt.apiserver import tlsconfig


@dataclass(frozen=True, slots=True)
class ClientCert:
    """A client certificate and key on disk."""

    cert: Path
    key: Path


def admin(pki: pki_module.Pki) -> ClientCert:
    """The admin client certificate of a PKI (CN plnt-admin, O system:masters)."""
    return ClientCert(cert=pki.admin_cert, key=pki.admin_key)


def front_proxy(pki: pki_module.Pki) -> ClientCert:
    """The front-proxy client certificate of a PKI (CN front-proxy-client)."""
    return ClientCert(cert=pki.front_proxy_client_cert, key=pki.front_proxy_client_key)


def client_ca(pki: pki_module.Pki) -> pki_module.CertificateAuthority:
    return pki_module.CertificateAuthority.load(pki.ca_cert, pki.ca_key)


def front_proxy_ca(pki: pki_module.Pki) -> pki_module.CertificateAuthority:
    return pki_module.CertificateAuthority.load(pki.front_proxy_ca_cert, pki.front_proxy_ca_key)


def write_client_cert(
    ca: pki_module.CertificateAuthority,
    directory: Path,
    *,
    common_name: str,
    organizations: Sequence[str] = (),
    stem: str | None = None,
) -> ClientCert:
    """Issue a client certificate from `ca` and write it as `<stem>.crt` / `<stem>.key`."""
    cert_pem, key_pem = pki_module.issue_client_certificate(
        ca, common_name=common_name, organizations=organizations
    )
    return _write(directory, stem or common_name.replace(":", "_"), cert_pem, key_pem)


def write_cert_with_usage(
    ca: pki_module.CertificateAuthority,
    directory: Path,
    *,
    common_name: str,
    usages: Sequence[x509.ObjectIdentifier],
    stem: str,
) -> ClientCert:
    """A leaf from `ca` with exactly the given extended key usages (e.g. serverAuth only)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    certificate = builder.sign(ca.key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return _write(directory, stem, certificate.public_bytes(serialization.Encoding.PEM), key_pem)


def foreign_ca(common_name: str = "stranger-ca") -> pki_module.CertificateAuthority:
    """A CA the server has never heard of."""
    return pki_module.CertificateAuthority.create(common_name)


def server_context(pki: pki_module.Pki) -> ssl.SSLContext:
    """The server context plnt uses, trusting both client CAs of `pki`."""
    return tlsconfig.server_ssl_context(pki, client_ca_files=pki.client_ca_files)


def client_context(pki: pki_module.Pki, *, cert: ClientCert | None = None) -> ssl.SSLContext:
    """A client context that trusts `pki`'s CA and presents `cert` if given."""
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    if cert is not None:
        context.load_cert_chain(certfile=cert.cert, keyfile=cert.key)
    return context


@contextlib.asynccontextmanager
async def client_session(
    pki: pki_module.Pki, *, cert: ClientCert | None = None
) -> AsyncIterator[aiohttp.ClientSession]:
    """An aiohttp session over TLS to a server of `pki`, presenting `cert` if given."""
    connector = aiohttp.TCPConnector(ssl=client_context(pki, cert=cert), force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session


@contextlib.asynccontextmanager
async def serve_https(
    app: web.Application, context: ssl.SSLContext, *, handler_cancellation: bool = True
) -> AsyncIterator[str]:
    """Serve `app` over HTTPS on a free port of 127.0.0.1; yields the base URL.

    `plnt up` cancels a handler whose client went away; `plnt serve` does not
    (`handler_cancellation=False`), so its streams learn of a hang-up from a failed write.
    """
    runner = web.AppRunner(app, handler_cancellation=handler_cancellation)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"https://{host}:{port}"
    finally:
        await runner.cleanup()


def _write(directory: Path, stem: str, cert_pem: bytes, key_pem: bytes) -> ClientCert:
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
    key.write_bytes(key_pem)
    key.chmod(0o600)
    cert.write_bytes(cert_pem)
    return ClientCert(cert=cert, key=key)
