"""The serving TLS of `plnt serve`: a certificate and client CAs that change without a restart.

In a cluster the serving certificate is a mounted Secret that cert-manager rotates, and
the CAs that may sign client certificates come from the cluster's authentication
ConfigMap, which changes when the front-proxy CA is rotated. Python cannot take a CA
out of an `ssl.SSLContext`, so each change builds a new context, and the listening
context's SNI callback (which OpenSSL calls for every ClientHello, with or without a
server name) hands each new connection the current one. Open connections keep the
context they began with, as Go's `GetConfigForClient` does.

The files are checked at most every `check_every` seconds, on a handshake; a change
that cannot be loaded (a half-written Secret) keeps the previous certificate and is
logged. Errors: `ServingFileError` at start-up, naming the file that cannot be used.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("plnt.apiserver")


class ServingFileError(Exception):
    """The serving certificate or key cannot be loaded; the message names the file."""


def _stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    stamps = []
    for path in paths:
        info = path.stat()
        stamps.append((info.st_mtime_ns, info.st_size))
    return tuple(stamps)


class ReloadingServerContext:
    """The listening `context`, whose connections get the newest certificate and CAs."""

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        *,
        client_cas: Sequence[bytes] = (),
        check_every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cert_file, self._key_file = cert_file, key_file
        self._client_cas = tuple(client_cas)
        self._check_every, self._clock = check_every, clock
        try:
            self._stamps = _stamp(cert_file, key_file)
            self._current = self._build()
        except (OSError, ssl.SSLError) as error:
            raise ServingFileError(
                f"cannot load the serving certificate {cert_file} and key {key_file}: {error}"
            ) from error
        self._checked = clock()
        self.context = self._build()
        self.context.sni_callback = self._choose

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(certfile=self._cert_file, keyfile=self._key_file)
        # Request, never require: tokens and the health probes come without certificates.
        context.verify_mode = ssl.CERT_OPTIONAL
        for pem in self._client_cas:
            context.load_verify_locations(cadata=pem.decode())
        context.set_alpn_protocols(["http/1.1"])
        return context

    def _choose(self, connection: ssl.SSLObject, server_name: str | None, _: object) -> None:
        self.reload()
        connection.context = self._current

    def set_client_cas(self, pems: Sequence[bytes]) -> None:
        """Ask new connections for certificates of these CAs (and only these)."""
        previous = self._client_cas
        self._client_cas = tuple(pems)
        try:
            self._current = self._build()
        except ssl.SSLError as error:
            self._client_cas = previous
            log.error("client CAs not applied, keeping the previous ones: %s", error)

    def reload(self) -> bool:
        """Load the certificate files again if they changed; True when a new one is in use."""
        now = self._clock()
        if now - self._checked < self._check_every:
            return False
        self._checked = now
        try:
            stamps = _stamp(self._cert_file, self._key_file)
            if stamps == self._stamps:
                return False
            self._current = self._build()
        except (OSError, ssl.SSLError) as error:
            log.warning("serving certificate not reloaded, keeping the previous one: %s", error)
            return False
        self._stamps = stamps
        log.info("serving certificate reloaded from %s", self._cert_file)
        return True
