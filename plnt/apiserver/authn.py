"""Who is calling: the authenticators of the API server, in kube-apiserver's order.

Each authenticator answers a request with a `UserInfo`, with None ("not mine": the
request carries no credential of this kind) or by raising `AuthenticationFailed` (a
credential of this kind was presented and is bad). `UnionAuthenticator` asks them in
order — request-header (front-proxy), client certificate, bearer token — and returns
the first user; an error raised earlier only counts when nobody succeeds, as in
k8s.io/apiserver's union authenticator. Every authenticated user gets the group
`system:authenticated`.

The front-proxy trust rule: `X-Remote-*` headers are identity only when the
connection's client certificate was issued by the request-header CA for client
authentication and its CN is allowed. `RequestHeaderAuthenticator` is the only code
that reads them; on every other request they are ignored, and `strip_identity_headers`
removes them so later handlers cannot mistake them for identity.

Exception tree: `AuthenticationFailed` (→ 401 Unauthorized). Configuration errors:
`TokenFileError` (a malformed token file, raised at load time).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import NameOID
from multidict import CIMultiDict

from plnt.apiserver import tlsconfig

log = logging.getLogger(__name__)

SYSTEM_AUTHENTICATED = "system:authenticated"
SYSTEM_MASTERS = "system:masters"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """An authenticated identity, shaped like k8s.io/apiserver's user.Info."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class AuthenticationFailed(Exception):
    """Credentials were presented and are not valid; the answer is 401."""


class TokenFileError(Exception):
    """The static token file cannot be used."""


class Authenticator(Protocol):
    """Answers a request with a user, None ("not mine"), or AuthenticationFailed."""

    async def authenticate(self, request: web.Request) -> UserInfo | None: ...


# --- request header (front proxy) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestHeaderOptions:
    """kube-apiserver's `--requestheader-*` settings, with the aggregator's defaults."""

    allowed_names: tuple[str, ...] = ()  # empty: any CN from the request-header CA
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ("X-Remote-Uid",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_headers_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> RequestHeaderOptions:
        """Options from ConfigMap kube-system/extension-apiserver-authentication, whose
        list values are JSON arrays of strings (missing keys keep the defaults)."""
        defaults = cls()

        def strings(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            raw = data.get(key)
            if raw is None or not raw.strip():
                return default
            try:
                value = json.loads(raw)
            except ValueError as error:
                raise ValueError(f"{key} must be a JSON array of strings: {error}") from error
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key} must be a JSON array of strings")
            return tuple(value)

        return cls(
            allowed_names=strings("requestheader-allowed-names", ()),
            username_headers=strings("requestheader-username-headers", defaults.username_headers),
            uid_headers=strings("requestheader-uid-headers", defaults.uid_headers),
            group_headers=strings("requestheader-group-headers", defaults.group_headers),
            extra_headers_prefixes=strings(
                "requestheader-extra-headers-prefix", defaults.extra_headers_prefixes
            ),
        )

    def identity_header_names(self, names: Iterable[str]) -> set[str]:
        """Those of `names` (header names) that these options read as identity."""
        exact = {h.lower() for h in (*self.username_headers, *self.uid_headers)}
        exact.update(h.lower() for h in self.group_headers)
        prefixes = tuple(p.lower() for p in self.extra_headers_prefixes)
        return {n for n in names if n.lower() in exact or n.lower().startswith(prefixes)}


class RequestHeaderAuthenticator:
    """Identity from `X-Remote-*` headers, set by a trusted front proxy (kube-apiserver).

    Trusted only when the connection's client certificate was issued by `ca` with the
    clientAuth usage and its CN is allowed. A certificate from another CA is "not mine";
    one from `ca` with a CN outside `allowed_names` is an authentication failure. With a
    trusted certificate but no user-name header the answer is "not mine", as in kube.
    """

    def __init__(self, ca: tlsconfig.TrustBundle, *, options: RequestHeaderOptions) -> None:
        self._ca = ca
        self._options = options

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        certificate = tlsconfig.peer_certificate(request)
        if certificate is None or not self._ca.verifies(certificate):
            return None
        common_name = _common_name(certificate)
        allowed = self._options.allowed_names
        if allowed and common_name not in allowed:
            raise AuthenticationFailed(
                f"front-proxy client certificate CN {common_name!r} is not in the allowed list"
            )
        name = _first_value(request, self._options.username_headers)
        if not name:
            return None
        groups = tuple(
            value
            for header in self._options.group_headers
            for value in request.headers.getall(header, ())
        )
        return UserInfo(
            name=name,
            groups=groups,
            uid=_first_value(request, self._options.uid_headers),
            extra=_extra(request, self._options.extra_headers_prefixes),
        )


def strip_identity_headers(request: web.Request, *, options: RequestHeaderOptions) -> web.Request:
    """The request without any header `options` reads as identity.

    Call it after authentication (kube does the same) so that no later code can read a
    spoofed `X-Remote-User` as identity; the authenticated user travels on its own.
    """
    names = options.identity_header_names(request.headers.keys())
    if not names:
        return request
    kept = [(k, v) for k, v in request.headers.items() if k not in names]
    return request.clone(headers=CIMultiDict(kept))


def _first_value(request: web.Request, headers: Sequence[str]) -> str:
    for header in headers:
        for value in request.headers.getall(header, ()):
            if value:
                return value
    return ""


_MALFORMED_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _unescape_extra_key(encoded: str) -> str:
    # Like Go's url.PathUnescape: a malformed escape leaves the key as sent.
    if _MALFORMED_ESCAPE.search(encoded):
        return encoded
    return urllib.parse.unquote(encoded, errors="strict")


def _extra(request: web.Request, prefixes: Sequence[str]) -> dict[str, tuple[str, ...]]:
    lowered = tuple(p.lower() for p in prefixes)
    extra: dict[str, list[str]] = {}
    for header, value in request.headers.items():
        lower = header.lower()
        for prefix in lowered:
            if lower.startswith(prefix) and len(lower) > len(prefix):
                try:
                    key = _unescape_extra_key(lower[len(prefix) :])
                except UnicodeDecodeError:
                    key = lower[len(prefix) :]
                extra.setdefault(key, []).append(value)
                break
    return {key: tuple(values) for key, values in extra.items()}


# --- client certificate -----------------------------------------------------------------


class ClientCertificateAuthenticator:
    """Identity from a client certificate issued by the client CA: CN = user, O = groups.

    No certificate is "not mine"; a certificate this CA did not issue for client
    authentication (such as the front proxy's) is a failure, as kube's x509 verifier
    reports — the union still lets another credential succeed.
    """

    def __init__(self, ca: tlsconfig.TrustBundle) -> None:
        self._ca = ca

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        certificate = tlsconfig.peer_certificate(request)
        if certificate is None:
            return None
        if not self._ca.verifies(certificate):
            raise AuthenticationFailed("client certificate is not signed by the client CA")
        name = _common_name(certificate)
        if not name:
            return None
        groups = tuple(
            str(attribute.value)
            for attribute in certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        )
        return UserInfo(name=name, groups=groups)


def _common_name(certificate: x509.Certificate) -> str:
    attributes = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attributes[-1].value) if attributes else ""  # Go keeps the last CN


# --- static bearer tokens ---------------------------------------------------------------


class TokenFileAuthenticator:
    """Bearer tokens from a static file in kube's `--token-auth-file` CSV format:
    `token,user,uid[,"group1,group2"]`, one per line.

    A presented token that is not in the file is a failure. Tokens are kept only as
    SHA-256 digests and compared in constant time against every entry.

    Unlike kube-apiserver, which reads the file once, a file-backed authenticator notices
    when the file changes (its size, mtime or inode) and reads it again, so `plnt token
    create` takes effect without a restart. The file is looked at (one `stat`) at most
    once per `recheck_seconds` while the tokens presented are found, and always before a
    token is refused: a new token works on its first request, a removed one is refused
    within `recheck_seconds`. (A `stat` per request was about 3 % of a GET's CPU.) A
    file that has become unreadable or malformed keeps the tokens last read (and is
    logged); one that was removed authenticates nobody.
    """

    def __init__(
        self,
        entries: Mapping[str, UserInfo],
        *,
        path: Path | None = None,
        recheck_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._entries = _digests(entries)
        self._path = path
        self._seen = _file_state(path) if path is not None else None
        self._recheck_seconds = recheck_seconds
        self._clock = clock
        self._checked = clock()

    @classmethod
    def from_file(cls, path: Path) -> TokenFileAuthenticator:
        """Load the CSV token file at `path` (and follow its changes)."""
        return cls(_read_token_file(path), path=path)

    def _reload_if_changed(self) -> None:
        assert self._path is not None
        self._checked = self._clock()
        state = _file_state(self._path)
        if state == self._seen:
            return
        self._seen = state
        if state is None:
            self._entries = ()
            return
        try:
            self._entries = _digests(_read_token_file(self._path))
        except TokenFileError as error:
            log.warning("keeping the tokens last read: %s", error)

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        token = bearer_token(request)
        if token is None:
            return None
        checked = False
        if self._path is not None and self._clock() - self._checked >= self._recheck_seconds:
            self._reload_if_changed()
            checked = True
        digest = hashlib.sha256(token.encode()).digest()
        found = self._lookup(digest)
        if found is None and self._path is not None and not checked:
            self._reload_if_changed()  # a token added since the last look works at once
            found = self._lookup(digest)
        if found is None:
            raise AuthenticationFailed("invalid bearer token")
        return found

    def _lookup(self, digest: bytes) -> UserInfo | None:
        found: UserInfo | None = None
        for candidate, user in self._entries:  # no early exit: timing says nothing
            if hmac.compare_digest(candidate, digest) and found is None:
                found = user
        return found


def _digests(entries: Mapping[str, UserInfo]) -> tuple[tuple[bytes, UserInfo], ...]:
    return tuple((hashlib.sha256(token.encode()).digest(), user) for token, user in entries.items())


def _file_state(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _read_token_file(path: Path) -> dict[str, UserInfo]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise TokenFileError(f"cannot read token file {path}: {error}") from error
    return parse_token_file(text, source=str(path))


def add_token(path: Path, *, token: str, user: str, groups: Sequence[str] = ()) -> None:
    """Add one token line to the token file (created 0600 if missing), atomically.

    The file is checked first (a malformed one is left alone: TokenFileError), then
    written whole to a temporary file renamed over it, so a server reading it never sees
    half a line. The uid column is the user name.
    """
    text = ""
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if user in {u.name for u in parse_token_file(text, source=str(path)).values()}:
            log.info("token file %s already has tokens for %s; adding another", path, user)
    row = io.StringIO()
    csv.writer(row, lineterminator="\n").writerow([token, user, user, ",".join(groups)])
    if text and not text.endswith("\n"):
        text += "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text + row.getvalue(), encoding="utf-8")
    temporary.chmod(0o600)
    os.replace(temporary, path)


def bearer_token(request: web.Request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    return token or None


def parse_token_file(text: str, *, source: str = "token file") -> dict[str, UserInfo]:
    """Parse kube's static token CSV; rows need token, user and uid columns."""
    entries: dict[str, UserInfo] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) < 3:
            raise TokenFileError(
                f"{source} line {number}: need at least 3 columns (token, user, uid), "
                f"found {len(row)}"
            )
        token, name, uid = row[0].strip(), row[1].strip(), row[2].strip()
        if not token or not name:
            raise TokenFileError(f"{source} line {number}: token and user must not be empty")
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
        entries[token] = UserInfo(name=name, uid=uid, groups=groups)
    return entries


# --- the chain ----------------------------------------------------------------------------


class UnionAuthenticator:
    """Asks each authenticator in order; the first user wins, and gets
    `system:authenticated` if it lacks it. Errors matter only when nobody succeeds:
    then the first one is raised. None when no authenticator found a credential."""

    def __init__(self, authenticators: Sequence[Authenticator]) -> None:
        self._authenticators = tuple(authenticators)

    async def authenticate(self, request: web.Request) -> UserInfo | None:
        failure: AuthenticationFailed | None = None
        for authenticator in self._authenticators:
            try:
                user = await authenticator.authenticate(request)
            except AuthenticationFailed as error:
                failure = failure or error
                continue
            if user is not None:
                return with_authenticated_group(user)
        if failure is not None:
            raise failure
        return None


def with_authenticated_group(user: UserInfo) -> UserInfo:
    """`user` with `system:authenticated` added unless it is there already."""
    if SYSTEM_AUTHENTICATED in user.groups:
        return user
    return UserInfo(
        name=user.name, groups=(*user.groups, SYSTEM_AUTHENTICATED), uid=user.uid, extra=user.extra
    )


def standard_authenticator(
    *,
    client_ca: tlsconfig.TrustBundle,
    requestheader_ca: tlsconfig.TrustBundle | None = None,
    requestheader_options: RequestHeaderOptions | None = None,
    token_file: Path | None = None,
) -> UnionAuthenticator:
    """The chain in kube's order: request-header (if configured), client certificate,
    static tokens (if a file is given)."""
    chain: list[Authenticator] = []
    if requestheader_ca is not None:
        chain.append(
            RequestHeaderAuthenticator(
                requestheader_ca, options=requestheader_options or RequestHeaderOptions()
            )
        )
    chain.append(ClientCertificateAuthenticator(client_ca))
    if token_file is not None:
        chain.append(TokenFileAuthenticator.from_file(token_file))
    return UnionAuthenticator(chain)
