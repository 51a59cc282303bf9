"""`plnt serve`'s TLS: a rotated serving certificate and changed client CAs apply to new
connections without a restart (real TLS handshakes over loopback)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509

from plnt.apiserver import pki, servingcerts


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


@pytest.fixture
def serving_ca() -> pki.CertificateAuthority:
    return pki.CertificateAuthority.create("serving-ca")


async def serve(context: ssl.SSLContext) -> tuple[asyncio.Server, int, list[bool]]:
    """A TLS server answering nothing; records whether each client sent a certificate."""
    presented: list[bool] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        presented.append(ssl_object.getpeercert(binary_form=True) is not None)
        writer.write(b"x")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    return server, server.sockets[0].getsockname()[1], presented


@pytest.fixture
async def files(
    tmp_path: Path, serving_ca: pki.CertificateAuthority
) -> AsyncIterator[tuple[Path, Path]]:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    pem, key_pem = pki.issue_serving_certificate(
        serving_ca, sans=["localhost"], common_name="first"
    )
    write(cert, pem)
    write(key, key_pem)
    yield cert, key


async def handshake(
    port: int, ca: pki.CertificateAuthority, *, client: tuple[bytes, bytes] | None = None, tmp: Path
) -> tuple[str, bytes]:
    """(the server certificate's CN, the first byte the server sent; b"" if it refused)."""
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    if client is not None:
        (tmp / "c.crt").write_bytes(client[0])
        (tmp / "c.key").write_bytes(client[1])
        context.load_cert_chain(tmp / "c.crt", tmp / "c.key")
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost"
    )
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    common_name = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    try:
        first = await reader.read(1)
    except (ssl.SSLError, ConnectionResetError):
        first = b""
    writer.close()
    return common_name, first


async def test_a_rotated_certificate_is_served_to_new_connections_once_the_check_is_due(
    files: tuple[Path, Path], serving_ca: pki.CertificateAuthority, tmp_path: Path
) -> None:
    cert, key = files
    clock = Clock()
    tls = servingcerts.ReloadingServerContext(cert, key, check_every=5, clock=clock)
    server, port, _ = await serve(tls.context)
    async with server:
        assert (await handshake(port, serving_ca, tmp=tmp_path))[0] == "CN=first"
        pem, key_pem = pki.issue_serving_certificate(
            serving_ca, sans=["localhost"], common_name="second"
        )
        write(key, key_pem)
        write(cert, pem)
        assert (await handshake(port, serving_ca, tmp=tmp_path))[0] == "CN=first"  # not due yet
        clock.now += 5
        assert (await handshake(port, serving_ca, tmp=tmp_path))[0] == "CN=second"


async def test_a_half_written_certificate_keeps_the_previous_one(
    files: tuple[Path, Path], serving_ca: pki.CertificateAuthority, tmp_path: Path
) -> None:
    cert, key = files
    clock = Clock()
    tls = servingcerts.ReloadingServerContext(cert, key, check_every=1, clock=clock)
    server, port, _ = await serve(tls.context)
    async with server:
        write(cert, b"-----BEGIN CERTIFICATE-----\ntruncated")
        clock.now += 1
        assert (await handshake(port, serving_ca, tmp=tmp_path))[0] == "CN=first"


async def test_client_certificates_of_a_new_ca_are_asked_for_after_the_cas_change(
    files: tuple[Path, Path], serving_ca: pki.CertificateAuthority, tmp_path: Path
) -> None:
    cert, key = files
    old, new = pki.CertificateAuthority.create("old-ca"), pki.CertificateAuthority.create("new-ca")
    tls = servingcerts.ReloadingServerContext(cert, key, client_cas=[old.cert_pem], clock=Clock())
    server, port, presented = await serve(tls.context)
    user = pki.issue_client_certificate(new, common_name="ann")
    async with server:
        await handshake(port, serving_ca, client=user, tmp=tmp_path)
        tls.set_client_cas([new.cert_pem])
        _, first = await handshake(port, serving_ca, client=user, tmp=tmp_path)
    assert first == b"x"
    assert presented == [True]  # the first handshake failed on the server: unknown CA


def test_a_missing_key_file_is_refused_at_start_naming_the_files(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    cert, _ = files
    with pytest.raises(servingcerts.ServingFileError, match=r"tls\.crt.*missing\.key"):
        servingcerts.ReloadingServerContext(cert, tmp_path / "missing.key")
