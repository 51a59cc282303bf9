"""Authentication over real TLS: a test-only HTTPS app on 127.0.0.1 runs the standard
authenticator chain and echoes the identity it found; real clients present real
certificates, tokens and (spoofed or proxied) X-Remote-* headers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography.x509.oid import ExtendedKeyUsageOID

from plnt.apiserver import authn, tlsconfig
from plnt.apiserver.pki import Pki, ensure_pki
from tests.support import tls

TOKENS = 'sekret-token,carol,uid-carol,"plnt:viewers,plnt:invokers"\nother-token,dave,uid-dave\n'
OPTIONS = authn.RequestHeaderOptions(allowed_names=("front-proxy-client",))


async def whoami(request: web.Request) -> web.Response:
    """Run the chain, strip identity headers, and report what a handler would see."""
    authenticator: authn.Authenticator = request.app[AUTHENTICATOR]
    try:
        user = await authenticator.authenticate(request)
    except authn.AuthenticationFailed as error:
        return web.json_response({"error": str(error)}, status=401)
    stripped = authn.strip_identity_headers(request, options=OPTIONS)
    body: dict[str, Any] = {
        "user": None,
        "leftover": sorted(h for h in stripped.headers if h.lower().startswith("x-remote")),
    }
    if user is not None:
        body["user"] = {
            "name": user.name,
            "groups": list(user.groups),
            "uid": user.uid,
            "extra": {k: list(v) for k, v in user.extra.items()},
        }
    return web.json_response(body)


AUTHENTICATOR = web.AppKey("authenticator", authn.UnionAuthenticator)


def build_app(
    pki: Pki, *, token_file: Path, options: authn.RequestHeaderOptions
) -> web.Application:
    app = web.Application()
    app[AUTHENTICATOR] = authn.standard_authenticator(
        client_ca=tlsconfig.TrustBundle.from_file(pki.ca_cert),
        requestheader_ca=tlsconfig.TrustBundle.from_file(pki.front_proxy_ca_cert),
        requestheader_options=options,
        token_file=token_file,
    )
    app.router.add_get("/whoami", whoami)
    return app


@dataclass
class Server:
    pki: Pki
    url: str
    certs: Path

    async def call(
        self, *, cert: tls.ClientCert | None = None, headers: Any = None
    ) -> tuple[int, dict[str, Any]]:
        async with (
            tls.client_session(self.pki, cert=cert) as session,
            session.get(f"{self.url}/whoami", headers=headers) as response,
        ):
            return response.status, await response.json()


async def start(tmp_path: Path, options: authn.RequestHeaderOptions) -> AsyncIterator[Server]:
    pki = ensure_pki(tmp_path / "pki")
    token_file = tmp_path / "tokens.csv"
    token_file.write_text(TOKENS)
    app = build_app(pki, token_file=token_file, options=options)
    async with tls.serve_https(app, tls.server_context(pki)) as url:
        yield Server(pki=pki, url=url, certs=tmp_path / "certs")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async for running in start(tmp_path, OPTIONS):
        yield running


@pytest.fixture
async def any_cn_server(tmp_path: Path) -> AsyncIterator[Server]:
    async for running in start(tmp_path, authn.RequestHeaderOptions(allowed_names=())):
        yield running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


SPOOFED = [
    ("X-Remote-User", "mallory"),
    ("X-Remote-Group", "system:masters"),
    ("X-Remote-Extra-Scopes", "all"),
]


# --- client certificates ------------------------------------------------------------------


async def test_admin_certificate_authenticates_plnt_admin_in_system_masters(
    server: Server,
) -> None:
    status, body = await server.call(cert=tls.admin(server.pki))

    assert status == 200
    assert body["user"] == {
        "name": "plnt-admin",
        "groups": ["system:masters", "system:authenticated"],
        "uid": "",
        "extra": {},
    }


async def test_certificate_from_client_ca_maps_cn_to_user_and_o_to_groups(
    server: Server,
) -> None:
    cert = tls.write_client_cert(
        tls.client_ca(server.pki),
        server.certs,
        common_name="alice",
        organizations=["plnt:viewers", "team-a"],
    )

    _, body = await server.call(cert=cert)

    assert body["user"]["name"] == "alice"
    assert body["user"]["groups"] == ["plnt:viewers", "team-a", "system:authenticated"]


async def test_request_without_credentials_is_not_authenticated(server: Server) -> None:
    status, body = await server.call()

    assert (status, body["user"]) == (200, None)


async def test_certificate_from_an_unknown_ca_fails_the_handshake_and_the_server_keeps_serving(
    server: Server,
) -> None:
    stranger = tls.write_client_cert(tls.foreign_ca(), server.certs, common_name="plnt-admin")

    with pytest.raises(aiohttp.ClientConnectionError):
        await server.call(cert=stranger)

    status, _ = await server.call(cert=tls.admin(server.pki))
    assert status == 200


async def test_client_ca_certificate_without_client_auth_usage_fails_the_handshake(
    server: Server,
) -> None:
    server_only = tls.write_cert_with_usage(
        tls.client_ca(server.pki),
        server.certs,
        common_name="plnt-admin",
        usages=[ExtendedKeyUsageOID.SERVER_AUTH],
        stem="server-only",
    )

    with pytest.raises(aiohttp.ClientConnectionError):
        await server.call(cert=server_only)


# --- bearer tokens ------------------------------------------------------------------------------


async def test_token_from_the_token_file_authenticates_its_user_uid_and_groups(
    server: Server,
) -> None:
    _, body = await server.call(headers=bearer("sekret-token"))

    assert body["user"] == {
        "name": "carol",
        "groups": ["plnt:viewers", "plnt:invokers", "system:authenticated"],
        "uid": "uid-carol",
        "extra": {},
    }


async def test_unknown_token_is_rejected_with_401(server: Server) -> None:
    status, body = await server.call(headers=bearer("guess"))

    assert status == 401
    assert body == {"error": "invalid bearer token"}


async def test_basic_authorization_is_not_a_token_and_is_ignored(server: Server) -> None:
    status, body = await server.call(headers={"Authorization": "Basic YWRtaW46YWRtaW4="})

    assert (status, body["user"]) == (200, None)


# --- front proxy: spoofing ---------------------------------------------------------------------


async def test_spoofed_remote_user_without_a_certificate_is_ignored(server: Server) -> None:
    status, body = await server.call(headers=SPOOFED)

    assert (status, body["user"]) == (200, None)
    assert body["leftover"] == []


async def test_spoofed_remote_user_with_the_admin_certificate_yields_the_admin(
    server: Server,
) -> None:
    _, body = await server.call(cert=tls.admin(server.pki), headers=SPOOFED)

    assert body["user"]["name"] == "plnt-admin"
    assert body["leftover"] == []


async def test_spoofed_remote_user_with_a_token_yields_the_token_user(server: Server) -> None:
    _, body = await server.call(headers=[*SPOOFED, *bearer("other-token").items()])

    assert body["user"]["name"] == "dave"
    assert "system:masters" not in body["user"]["groups"]


async def test_front_proxy_certificate_with_a_disallowed_cn_gets_no_identity_from_headers(
    server: Server,
) -> None:
    intruder = tls.write_client_cert(
        tls.front_proxy_ca(server.pki), server.certs, common_name="intruder"
    )

    status, body = await server.call(cert=intruder, headers=SPOOFED)

    assert status == 401
    assert "not in the allowed list" in body["error"]


async def test_front_proxy_certificate_with_a_disallowed_cn_and_a_token_yields_the_token_user(
    server: Server,
) -> None:
    intruder = tls.write_client_cert(
        tls.front_proxy_ca(server.pki), server.certs, common_name="intruder"
    )

    _, body = await server.call(cert=intruder, headers=[*SPOOFED, *bearer("other-token").items()])

    assert body["user"]["name"] == "dave"


# --- front proxy: trusted --------------------------------------------------------------------


async def test_front_proxy_with_the_allowed_cn_is_trusted_for_user_uid_groups_and_extra(
    server: Server,
) -> None:
    headers = [
        ("X-Remote-User", "system:serviceaccount:team:deployer"),
        ("X-Remote-Uid", "4711"),
        ("X-Remote-Group", "system:serviceaccounts"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-Acme.com%2Fproject", "alpha"),
        ("X-Remote-Extra-Acme.com%2Fproject", "beta"),
        ("X-Remote-Extra-Scopes", "view"),
    ]

    status, body = await server.call(cert=tls.front_proxy(server.pki), headers=headers)

    assert status == 200
    assert body["user"] == {
        "name": "system:serviceaccount:team:deployer",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "uid": "4711",
        "extra": {"acme.com/project": ["alpha", "beta"], "scopes": ["view"]},
    }
    assert body["leftover"] == []


async def test_front_proxy_user_without_groups_gets_system_authenticated(server: Server) -> None:
    headers = {"X-Remote-User": "system:kube-aggregator"}

    _, body = await server.call(cert=tls.front_proxy(server.pki), headers=headers)

    assert body["user"]["groups"] == ["system:authenticated"]


async def test_any_cn_from_the_request_header_ca_is_trusted_when_no_names_are_configured(
    any_cn_server: Server,
) -> None:
    other = tls.write_client_cert(
        tls.front_proxy_ca(any_cn_server.pki), any_cn_server.certs, common_name="aggregator-2"
    )

    _, body = await any_cn_server.call(cert=other, headers={"X-Remote-User": "erin"})

    assert body["user"]["name"] == "erin"


async def test_front_proxy_certificate_is_not_accepted_as_an_ordinary_client_certificate(
    server: Server,
) -> None:
    status, body = await server.call(cert=tls.front_proxy(server.pki))

    assert status == 401
    assert "not signed by the client CA" in body["error"]


async def test_client_ca_certificate_cannot_act_as_front_proxy_even_with_the_allowed_cn(
    server: Server,
) -> None:
    impostor = tls.write_client_cert(
        tls.client_ca(server.pki), server.certs, common_name="front-proxy-client"
    )

    _, body = await server.call(cert=impostor, headers=SPOOFED)

    assert body["user"]["name"] == "front-proxy-client"
    assert "system:masters" not in body["user"]["groups"]
