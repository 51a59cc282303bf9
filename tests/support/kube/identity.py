"""Authentication of the stand-in's own callers, in kube-apiserver's order.

A client certificate issued by the cluster's client CA (CN = user, O = groups); then a
bearer token from the per-test `Tokens` table (as kube's static token file or any token
authenticator: an unknown token is a 401, never anonymous); with neither, the
anonymous user (`system:anonymous`, group `system:unauthenticated`), which
authorization then judges. Every authenticated user gets `system:authenticated`.

After authentication kube's filter deletes the `Authorization` header and every
`X-Remote-*` header from the request, so nothing downstream (the aggregator's proxy)
can forward the user's token or a spoofed identity; `identity_free_headers` gives the
headers that remain.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from multidict import CIMultiDict

from tests.support.kube import statuses
from tests.support.kube.attributes import ANONYMOUS, User

_IDENTITY_HEADERS = ("x-remote-user", "x-remote-uid", "x-remote-group")
_IDENTITY_PREFIX = "x-remote-extra-"


class Tokens:
    """Bearer token -> user; safe to change from any thread while the server runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, User] = {}

    def add(
        self,
        token: str,
        name: str,
        groups: Iterable[str] = (),
        *,
        uid: str = "",
        extra: Mapping[str, Iterable[str]] | None = None,
    ) -> User:
        user = User(
            name=name,
            uid=uid,
            groups=tuple(groups),
            extra={key: tuple(values) for key, values in (extra or {}).items()},
        )
        with self._lock:
            self._users[token] = user
        return user

    def remove(self, token: str) -> None:
        with self._lock:
            self._users.pop(token, None)

    def lookup(self, token: str) -> User | None:
        with self._lock:
            return self._users.get(token)


def bearer_token(headers: Mapping[str, str]) -> str | None:
    scheme, _, token = headers.get("Authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def peer_certificate(request: web.Request) -> x509.Certificate | None:
    ssl_object = request.transport.get_extra_info("ssl_object") if request.transport else None
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return x509.load_der_x509_certificate(der) if der else None


def user_from_certificate(certificate: x509.Certificate, ca: x509.Certificate) -> User | None:
    """x509.Verifier: issued by `ca` for client authentication; CN user, O groups."""
    try:
        certificate.verify_directly_issued_by(ca)
        usages = certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except (ValueError, TypeError, x509.ExtensionNotFound, Exception):
        return None
    if ExtendedKeyUsageOID.CLIENT_AUTH not in usages:
        return None
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        return None
    groups = tuple(
        str(a.value) for a in certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    )
    return User(name=str(names[-1].value), groups=groups)


def authenticate(request: web.Request, *, tokens: Tokens, client_ca: x509.Certificate) -> User:
    """The caller, or a 401 Status for a bad credential."""
    certificate = peer_certificate(request)
    if certificate is not None:
        user = user_from_certificate(certificate, client_ca)
        if user is not None:
            return user.with_authenticated_group()
    token = bearer_token(request.headers)
    if token is not None:
        user = tokens.lookup(token)
        if user is None:
            raise statuses.unauthorized()
        return user.with_authenticated_group()
    if certificate is not None:
        raise statuses.unauthorized()  # a certificate from an unknown CA, and nothing else
    return ANONYMOUS


def identity_free_headers(headers: Mapping[str, str]) -> CIMultiDict[str]:
    """The request headers without Authorization and X-Remote-* (kube strips them)."""
    kept: CIMultiDict[str] = CIMultiDict()
    for key, value in headers.items():
        lower = key.lower()
        if (
            lower == "authorization"
            or lower in _IDENTITY_HEADERS
            or lower.startswith(_IDENTITY_PREFIX)
        ):
            continue
        kept.add(key, value)
    return kept
