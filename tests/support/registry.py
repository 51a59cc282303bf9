"""A real OCI distribution registry (Debian `docker-registry`, CNCF distribution 2.8) for tests.

`running_registry()` starts `/usr/bin/docker-registry serve CONFIG` with its own config:
filesystem storage in a temporary directory, 127.0.0.1 on a free port, optionally htpasswd
basic auth (bcrypt cost 4, so requests stay fast). `running_token_registry()` configures the
registry's bearer-token auth instead and runs a small token service beside it (in a thread),
which signs ES256 tokens with a throwaway certificate the registry trusts. Each waits until
`/v2/` answers, yields a `Registry`, and always kills and reaps the process.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import http.server
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils

from plnt.processes.ports import free_port

BINARY = "/usr/bin/docker-registry"


@dataclass(frozen=True)
class Registry:
    """A running registry: `host` is `127.0.0.1:PORT`."""

    host: str
    username: str | None
    password: str | None
    log: Path
    storage: Path

    def blob_file(self, digest: str) -> Path:
        """Where the filesystem driver keeps a blob (tests tamper with it)."""
        hex_digest = digest.split(":", 1)[1]
        return (
            self.storage / "docker/registry/v2/blobs/sha256" / hex_digest[:2] / hex_digest / "data"
        )

    def ref(self, repository: str, tag: str = "v1") -> str:
        """An `oci://` reference into this registry."""
        return f"oci://{self.host}/{repository}:{tag}"


def _config(root: Path, port: int, htpasswd: Path | None, token_auth: str) -> str:
    auth = token_auth
    if htpasswd:
        auth = f"auth:\n  htpasswd:\n    realm: plnt-test\n    path: {htpasswd}\n"
    return (
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        f"{auth}"
    )


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"docker-registry exited early: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except urllib.error.HTTPError as exc:  # 401 from an auth-enabled registry is ready
            if exc.code == 401:
                return
        except OSError:
            pass
        time.sleep(0.02)  # polling interval of a condition wait with a deadline
    raise TimeoutError(f"docker-registry did not answer {url} in time: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def running_registry(
    *,
    username: str | None = None,
    password: str | None = None,
    token: tuple[TokenIssuer, str] | None = None,
    port: int | None = None,
) -> Iterator[Registry]:
    """Start a registry (with basic auth when a username is given); stop it on exit.

    `port` pins the port (a test that refers to the registry before it runs); else a free one.
    """
    if not os.path.exists(BINARY):
        raise RuntimeError(f"{BINARY} is missing: apt-get install docker-registry")
    root = Path(tempfile.mkdtemp(prefix="plnt-registry-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        htpasswd = None
        if username:
            htpasswd = root / "htpasswd"
            hashed = bcrypt.hashpw((password or "").encode(), bcrypt.gensalt(rounds=4))
            htpasswd.write_text(f"{username}:{hashed.decode()}\n")
        port = port or free_port()
        config = root / "config.yml"
        token_auth = ""
        if token is not None:
            issuer, realm = token
            bundle = root / "token-ca.pem"
            bundle.write_bytes(issuer.cert_pem())
            token_auth = (
                f"auth:\n  token:\n    realm: {realm}\n    service: {issuer.service}\n"
                f"    issuer: {issuer.issuer}\n    rootcertbundle: {bundle}\n"
            )
        config.write_text(_config(root, port, htpasswd, token_auth))
        log = root / "registry.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [BINARY, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT
            )
        _wait_ready(process, f"http://127.0.0.1:{port}/v2/", log)
        yield Registry(
            host=f"127.0.0.1:{port}",
            username=username,
            password=password,
            log=log,
            storage=root / "data",
        )
    finally:
        if process is not None:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


# --- bearer-token auth: a minimal token service per the distribution token spec ---


@dataclass(frozen=True)
class TokenIssuer:
    """Signs registry tokens (ES256, certificate in `x5c`) for a token-auth registry."""

    key: ec.EllipticCurvePrivateKey
    cert_der: bytes
    issuer: str = "plnt-test-issuer"
    service: str = "plnt-test-registry"

    @classmethod
    def create(cls) -> TokenIssuer:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "plnt test token issuer")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(key=key, cert_der=cert.public_bytes(serialization.Encoding.DER))

    def cert_pem(self) -> bytes:
        return x509.load_der_x509_certificate(self.cert_der).public_bytes(
            serialization.Encoding.PEM
        )

    def token(self, *, subject: str, scope: str | None) -> str:
        access = []
        if scope:
            kind, name, actions = scope.split(":", 2)
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(self.cert_der).decode()]}
        claims = {
            "iss": self.issuer,
            "sub": subject,
            "aud": self.service,
            "iat": now - 10,
            "nbf": now - 10,
            "exp": now + 600,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        r, s = utils.decode_dss_signature(
            self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        )
        return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@contextlib.contextmanager
def running_token_registry(*, username: str, password: str) -> Iterator[Registry]:
    """A registry with bearer-token auth, plus a token service on another port.

    The token service grants the requested scope to `username`/`password`, grants only `pull`
    to anonymous callers, and answers 401 to wrong credentials.
    """
    issuer = TokenIssuer.create()
    expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
            scope = (query.get("scope") or [None])[0]
            authorization = self.headers.get("Authorization")
            if authorization is None:
                subject = ""
                if scope:
                    kind, name, _ = scope.split(":", 2)
                    scope = f"{kind}:{name}:pull"
            elif authorization == expected:
                subject = username
            else:
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"token": issuer.token(subject=subject, scope=scope)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        realm = f"http://127.0.0.1:{server.server_address[1]}/token"
        with running_registry(token=(issuer, realm)) as registry:
            yield dataclasses.replace(registry, username=username, password=password)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
