"""The standalone PKI: what ensure_pki writes, and that it is idempotent."""

from __future__ import annotations

import datetime
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from plnt.apiserver import pki as pki_module
from plnt.apiserver.pki import CertificateAuthority, PkiError, ensure_pki


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def usages(certificate: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def subject(certificate: x509.Certificate, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(a.value) for a in certificate.subject.get_attributes_for_oid(oid)]


def lifetime(certificate: x509.Certificate) -> datetime.timedelta:
    return certificate.not_valid_after_utc - certificate.not_valid_before_utc


def test_ensure_pki_creates_every_file_with_private_keys_readable_by_owner_only(
    tmp_path: Path,
) -> None:
    pki = ensure_pki(tmp_path / "pki")

    for key in (
        pki.ca_key,
        pki.serving_key,
        pki.admin_key,
        pki.front_proxy_ca_key,
        pki.front_proxy_client_key,
    ):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    for cert in (
        pki.ca_cert,
        pki.serving_cert,
        pki.admin_cert,
        pki.front_proxy_ca_cert,
        pki.front_proxy_client_cert,
    ):
        assert load(cert).public_key().curve.name == "secp256r1"  # type: ignore[union-attr]
    assert stat.S_IMODE(pki.directory.stat().st_mode) == 0o700
    assert not [p for p in pki.directory.iterdir() if p.name.endswith(".tmp")]


def test_ensure_pki_is_idempotent_and_keeps_the_admin_credentials(tmp_path: Path) -> None:
    first = ensure_pki(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    second = ensure_pki(tmp_path)

    assert second == first
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_serving_certificate_has_loopback_sans_and_server_auth_only(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    serving = load(pki.serving_cert)

    assert pki_module.san_strings(serving) == {"127.0.0.1", "::1", "localhost"}
    assert usages(serving) == [ExtendedKeyUsageOID.SERVER_AUTH]
    serving.verify_directly_issued_by(load(pki.ca_cert))
    assert lifetime(serving) <= datetime.timedelta(days=366)


def test_a_new_extra_san_reissues_the_serving_certificate_but_not_the_ca(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    ca_before, admin_before = pki.ca_cert.read_bytes(), pki.admin_cert.read_bytes()

    ensure_pki(tmp_path, extra_sans=["plnt.plnt-system.svc", "10.0.0.7"])

    assert pki_module.san_strings(load(pki.serving_cert)) == {
        "127.0.0.1",
        "::1",
        "localhost",
        "plnt.plnt-system.svc",
        "10.0.0.7",
    }
    assert pki.ca_cert.read_bytes() == ca_before
    assert pki.admin_cert.read_bytes() == admin_before


def test_admin_certificate_names_plnt_admin_in_system_masters_for_client_auth(
    tmp_path: Path,
) -> None:
    pki = ensure_pki(tmp_path)
    admin = load(pki.admin_cert)

    assert subject(admin, NameOID.COMMON_NAME) == ["plnt-admin"]
    assert subject(admin, NameOID.ORGANIZATION_NAME) == ["system:masters"]
    assert usages(admin) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    admin.verify_directly_issued_by(load(pki.ca_cert))


def test_front_proxy_client_is_signed_by_its_own_ca_and_not_by_the_client_ca(
    tmp_path: Path,
) -> None:
    pki = ensure_pki(tmp_path)
    proxy = load(pki.front_proxy_client_cert)

    assert subject(proxy, NameOID.COMMON_NAME) == ["front-proxy-client"]
    assert usages(proxy) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    proxy.verify_directly_issued_by(load(pki.front_proxy_ca_cert))
    assert load(pki.front_proxy_ca_cert).subject != load(pki.ca_cert).subject
    with pytest.raises(ValueError):
        proxy.verify_directly_issued_by(load(pki.ca_cert))


def test_cas_are_leaf_only_signing_cas_valid_for_ten_years(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    for path in (pki.ca_cert, pki.front_proxy_ca_cert):
        ca = load(path)
        constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
        assert constraints.critical and constraints.value.ca
        assert constraints.value.path_length == 0
        assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
        assert datetime.timedelta(days=3650) <= lifetime(ca) <= datetime.timedelta(days=3651)


def test_a_ca_certificate_without_its_key_is_reported_not_replaced(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    pki.ca_key.unlink()

    with pytest.raises(PkiError, match=r"ca\.key"):
        ensure_pki(tmp_path)


def test_a_missing_admin_certificate_is_reissued_from_the_existing_ca(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    ca_before = pki.ca_cert.read_bytes()
    pki.admin_cert.unlink()

    ensure_pki(tmp_path)

    load(pki.admin_cert).verify_directly_issued_by(load(pki.ca_cert))
    assert pki.ca_cert.read_bytes() == ca_before


def test_issue_client_certificate_puts_user_in_cn_and_groups_in_o() -> None:
    ca = CertificateAuthority.create("test-ca")

    cert_pem, key_pem = pki_module.issue_client_certificate(
        ca, common_name="alice", organizations=["plnt:viewers", "plnt:invokers"], days=7
    )

    certificate = x509.load_pem_x509_certificate(cert_pem)
    assert subject(certificate, NameOID.COMMON_NAME) == ["alice"]
    assert subject(certificate, NameOID.ORGANIZATION_NAME) == ["plnt:viewers", "plnt:invokers"]
    assert lifetime(certificate) <= datetime.timedelta(days=7, minutes=5)
    assert b"BEGIN PRIVATE KEY" in key_pem
    certificate.verify_directly_issued_by(ca.certificate)
    assert isinstance(certificate.public_key(), ec.EllipticCurvePublicKey)


def test_leaves_close_to_expiry_are_reissued_but_cas_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki = ensure_pki(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=340)
    monkeypatch.setattr(pki_module, "_now", lambda: later)

    ensure_pki(tmp_path)

    changed = {p.name for p in tmp_path.iterdir() if p.read_bytes() != before[p.name]}
    assert changed == {
        "serving.crt",
        "serving.key",
        "admin.crt",
        "admin.key",
        "front-proxy-client.crt",
        "front-proxy-client.key",
    }
    assert load(pki.admin_cert).not_valid_after_utc > later + datetime.timedelta(days=300)
