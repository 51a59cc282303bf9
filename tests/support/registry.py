"""A real OCI distribution registry (Debian `docker-registry`, CNCF distribution 2.8) for tests.

`running_registry()` starts `/usr/bin/docker-registry serve CONFIG` with its own config:
filesystem storage in a temporary directory, 127.0.0.1 on a free port, optionally htpasswd
basic auth (bcrypt cost 4, so requests stay fast). It waits until `/v2/` answers, yields a
`Registry`, and always kills and reaps the process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt

BINARY = "/usr/bin/docker-registry"


@dataclass(frozen=True)
class Registry:
    """A running registry: `host` is `127.0.0.1:PORT`."""

    host: str
    username: str | None
    password: str | None
    log: Path

    def ref(self, repository: str, tag: str = "v1") -> str:
        """An `oci://` reference into this registry."""
        return f"oci://{self.host}/{repository}:{tag}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _config(root: Path, port: int, htpasswd: Path | None) -> str:
    auth = (
        f"auth:\n  htpasswd:\n    realm: plnt-test\n    path: {htpasswd}\n" if htpasswd else ""
    )
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
def running_registry(*, username: str | None = None, password: str | None = None) -> Iterator[Registry]:
    """Start a registry (with basic auth when a username is given); stop it on exit."""
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
        port = free_port()
        config = root / "config.yml"
        config.write_text(_config(root, port, htpasswd))
        log = root / "registry.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [BINARY, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT
            )
        _wait_ready(process, f"http://127.0.0.1:{port}/v2/", log)
        yield Registry(host=f"127.0.0.1:{port}", username=username, password=password, log=log)
    finally:
        if process is not None:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)
