"""Authentication pieces that need no connection: the token file, the ConfigMap
options, the union's rules, and certificate checks where time is the subject."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from cryptography import x509

from plnt.apiserver import authn, tlsconfig
from plnt.apiserver.pki import CertificateAuthority, issue_client_certificate


class Fixed:
    """An authenticator with a canned answer."""

    def __init__(self, answer: authn.UserInfo | authn.AuthenticationFailed | None) -> None:
        self.answer = answer
        self.calls = 0

    async def authenticate(self, request: web.Request) -> authn.UserInfo | None:
        self.calls += 1
        if isinstance(self.answer, authn.AuthenticationFailed):
            raise self.answer
        return self.answer


def request(headers: dict[str, str] | None = None) -> web.Request:
    return make_mocked_request("GET", "/apis", headers=headers or {})


def test_token_file_reads_kube_csv_with_quoted_groups_and_optional_group_column() -> None:
    entries = authn.parse_token_file(
        't1,alice,u1,"g1,g2"\n\nt2,bob,u2\nt3,carl,,""\n', source="tokens.csv"
    )

    assert entries == {
        "t1": authn.UserInfo(name="alice", uid="u1", groups=("g1", "g2")),
        "t2": authn.UserInfo(name="bob", uid="u2"),
        "t3": authn.UserInfo(name="carl"),
    }


def test_token_file_row_with_fewer_than_three_columns_is_an_error_naming_the_line() -> None:
    with pytest.raises(authn.TokenFileError, match=r"tokens\.csv line 2: need at least 3 columns"):
        authn.parse_token_file("t1,alice,u1\nt2,bob\n", source="tokens.csv")


def test_missing_token_file_is_a_token_file_error(tmp_path: Path) -> None:
    with pytest.raises(authn.TokenFileError, match="cannot read token file"):
        authn.TokenFileAuthenticator.from_file(tmp_path / "absent.csv")


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_token_added_to_the_file_works_on_its_first_request(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    authn.add_token(path, token="first", user="alice")
    clock = Clock()
    tokens = authn.TokenFileAuthenticator(
        authn.parse_token_file(path.read_text(), source=str(path)), path=path, clock=clock
    )
    assert (await tokens.authenticate(request({"Authorization": "Bearer first"}))).name == "alice"
    authn.add_token(path, token="second", user="bob")  # no time passes
    found = await tokens.authenticate(request({"Authorization": "Bearer second"}))
    assert found is not None and found.name == "bob"


async def test_a_token_removed_from_the_file_is_refused_once_the_file_is_looked_at_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tokens.csv"
    authn.add_token(path, token="kept", user="alice")
    authn.add_token(path, token="revoked", user="bob")
    clock = Clock()
    tokens = authn.TokenFileAuthenticator(
        authn.parse_token_file(path.read_text(), source=str(path)),
        path=path,
        recheck_seconds=1.0,
        clock=clock,
    )
    revoked = request({"Authorization": "Bearer revoked"})
    assert (await tokens.authenticate(revoked)).name == "bob"
    path.write_text("kept,alice,alice\n")
    clock.now += 0.5  # within the recheck interval the file is not looked at
    assert (await tokens.authenticate(revoked)).name == "bob"
    clock.now += 0.5
    with pytest.raises(authn.AuthenticationFailed):
        await tokens.authenticate(revoked)
    assert (await tokens.authenticate(request({"Authorization": "Bearer kept"}))).name == "alice"


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("Bearer   abc  ", "abc"),
        ("Bearer", None),
        ("Basic abc", None),
        ("", None),
    ],
)
def test_bearer_token_is_read_only_from_a_bearer_authorization_header(
    header: str, token: str | None
) -> None:
    assert authn.bearer_token(request({"Authorization": header})) == token


def test_requestheader_options_are_read_from_the_configmap_json_arrays() -> None:
    options = authn.RequestHeaderOptions.from_configmap(
        {
            "requestheader-allowed-names": '["front-proxy-client"]',
            "requestheader-username-headers": '["X-Remote-User"]',
            "requestheader-group-headers": '["X-Remote-Group"]',
            "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
            "requestheader-uid-headers": '["X-Remote-Uid"]',
        }
    )

    assert options == authn.RequestHeaderOptions(allowed_names=("front-proxy-client",))


def test_requestheader_options_reject_a_value_that_is_not_a_string_array() -> None:
    with pytest.raises(ValueError, match="requestheader-allowed-names"):
        authn.RequestHeaderOptions.from_configmap({"requestheader-allowed-names": '"x"'})


def test_strip_identity_headers_removes_every_configured_identity_header_only() -> None:
    original = request(
        {
            "X-Remote-User": "mallory",
            "x-remote-group": "system:masters",
            "X-Remote-Extra-Foo": "bar",
            "X-Remote-Uid": "1",
            "Accept": "application/json",
        }
    )

    stripped = authn.strip_identity_headers(original, options=authn.RequestHeaderOptions())

    assert dict(stripped.headers) == {"Accept": "application/json"}


async def test_union_returns_the_first_user_and_adds_system_authenticated() -> None:
    later = Fixed(authn.UserInfo(name="later"))
    union = authn.UnionAuthenticator(
        [Fixed(None), Fixed(authn.UserInfo(name="first", groups=("g",))), later]
    )

    user = await union.authenticate(request())

    assert user == authn.UserInfo(name="first", groups=("g", "system:authenticated"))
    assert later.calls == 0


async def test_union_failure_counts_only_when_no_authenticator_succeeds() -> None:
    failing = Fixed(authn.AuthenticationFailed("bad certificate"))

    succeeded = await authn.UnionAuthenticator(
        [failing, Fixed(authn.UserInfo(name="token-user"))]
    ).authenticate(request())
    with pytest.raises(authn.AuthenticationFailed, match="bad certificate"):
        await authn.UnionAuthenticator([failing, Fixed(None)]).authenticate(request())

    assert succeeded is not None and succeeded.name == "token-user"


async def test_union_of_authenticators_without_credentials_answers_none() -> None:
    assert (
        await authn.UnionAuthenticator([Fixed(None), Fixed(None)]).authenticate(request()) is None
    )


def test_system_authenticated_is_not_added_twice() -> None:
    user = authn.UserInfo(name="u", groups=("system:authenticated", "g"))

    assert authn.with_authenticated_group(user) is user


def test_trust_bundle_rejects_a_certificate_outside_its_validity_window() -> None:
    ca = CertificateAuthority.create("ca")
    cert_pem, _ = issue_client_certificate(ca, common_name="alice", days=2)
    certificate = x509.load_pem_x509_certificate(cert_pem)
    bundle = tlsconfig.TrustBundle.from_pem(ca.cert_pem)
    issued = certificate.not_valid_before_utc

    assert bundle.verifies(certificate, now=issued + datetime.timedelta(days=1))
    assert not bundle.verifies(certificate, now=issued + datetime.timedelta(days=3))
    assert not bundle.verifies(certificate, now=issued - datetime.timedelta(seconds=1))


def test_trust_bundle_finds_the_issuer_among_several_cas_with_the_same_name() -> None:
    old, new = (
        CertificateAuthority.create("rotating-ca"),
        CertificateAuthority.create("rotating-ca"),
    )
    certificate = x509.load_pem_x509_certificate(issue_client_certificate(new, common_name="a")[0])

    assert tlsconfig.TrustBundle.from_pem(old.cert_pem + new.cert_pem).verifies(certificate)
    assert not tlsconfig.TrustBundle.from_pem(old.cert_pem).verifies(certificate)


def test_trust_bundle_from_a_file_without_certificates_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "ca.crt"
    empty.write_text("not a certificate\n")

    with pytest.raises(tlsconfig.TrustBundleError):
        tlsconfig.TrustBundle.from_file(empty)


def test_a_request_without_tls_has_no_peer_certificate() -> None:
    assert tlsconfig.peer_certificate(request()) is None
