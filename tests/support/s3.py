"""`moto_server` as a stand-in S3 for tests, with SigV4 signature checking switched on.

moto is a test double, not a real object store; it is the only S3-compatible server that
can run here. By default it accepts any signature, so `running_moto()` first creates an IAM
user with an access key and an `s3:*` policy, then switches authentication on through
`/moto-api/reset-auth` (INITIAL_NO_AUTH_ACTION_COUNT = 0): from then on a request signed with
a wrong secret is refused. The process is always killed and reaped.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import botocore.session

from plnt.processes.ports import free_port

REGION = "us-east-1"
_POLICY = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
)


@dataclass(frozen=True)
class Moto:
    """A running moto_server with authentication on and one IAM key pair."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str

    def client(self, *, secret: str | None = None) -> object:
        """A botocore S3 client signed with this server's key (or another secret)."""
        return botocore.session.Session().create_client(
            "s3",
            region_name=REGION,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=secret or self.secret_access_key,
        )


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited early: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.05)  # polling interval of a condition wait with a deadline
    raise TimeoutError(f"moto_server did not answer {url} in time")


@contextlib.contextmanager
def running_moto() -> Iterator[Moto]:
    """Start moto_server on a free port, create IAM keys, enforce SigV4; stop it on exit."""
    root = Path(tempfile.mkdtemp(prefix="plnt-moto-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        port = free_port()
        endpoint = f"http://127.0.0.1:{port}"
        log = root / "moto.log"
        binary = Path(sys.executable).with_name("moto_server")
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(binary), "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        _wait_ready(process, f"{endpoint}/moto-api/", log)
        iam = botocore.session.Session().create_client(
            "iam",
            region_name=REGION,
            endpoint_url=endpoint,
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
        )
        iam.create_user(UserName="plnt")
        iam.put_user_policy(UserName="plnt", PolicyName="all", PolicyDocument=_POLICY)
        key = iam.create_access_key(UserName="plnt")["AccessKey"]
        request = urllib.request.Request(
            f"{endpoint}/moto-api/reset-auth",
            data=b"0",
            method="POST",
            # Any other content type makes the body arrive empty.
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(request, timeout=5):
            pass
        yield Moto(
            endpoint_url=endpoint,
            access_key_id=key["AccessKeyId"],
            secret_access_key=key["SecretAccessKey"],
        )
    finally:
        if process is not None:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)
