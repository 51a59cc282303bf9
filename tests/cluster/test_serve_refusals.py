"""`plnt serve` refuses bad input before it listens: exit status 1 and one line naming the
flag, file or key. Each case runs the real command in a child process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from plnt.apiserver import pki

TIMEOUT = 60


@pytest.fixture
def serving(tmp_path: Path) -> tuple[Path, Path]:
    ca = pki.CertificateAuthority.create("serving-ca")
    cert, key = pki.issue_serving_certificate(ca, sans=["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    return tmp_path / "tls.crt", tmp_path / "tls.key"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kubeconfig_to(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(config))
    return path


def serve(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "PLNT_"))}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "plnt", "serve", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=False,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_missing_certificate_file_is_named_with_its_flag(tmp_path: Path) -> None:
    result = serve(
        "--tls-cert-file", str(tmp_path / "nope.crt"),
        "--tls-private-key-file", str(tmp_path / "nope.key"),
        "--etcd-servers", "http://127.0.0.1:1",
        "--no-sagas",
        home=tmp_path,
    )  # fmt: skip
    line = one_error_line(result)
    assert "--tls-cert-file" in line and "nope.crt" in line and "no such file" in line


def test_a_key_that_does_not_match_is_refused_naming_both_flags(
    tmp_path: Path, serving: tuple[Path, Path]
) -> None:
    cert, _ = serving
    other = pki.issue_serving_certificate(pki.CertificateAuthority.create("x"), sans=["a"])[1]
    (tmp_path / "other.key").write_bytes(other)
    result = serve(
        "--tls-cert-file", str(cert),
        "--tls-private-key-file", str(tmp_path / "other.key"),
        "--etcd-servers", "http://127.0.0.1:1",
        "--no-sagas",
        home=tmp_path,
    )  # fmt: skip
    assert "--tls-cert-file/--tls-private-key-file" in one_error_line(result)


def test_outside_a_pod_without_a_kubeconfig_the_in_cluster_config_is_named(
    tmp_path: Path, serving: tuple[Path, Path]
) -> None:
    cert, key = serving
    result = serve(
        "--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
        "--etcd-servers", "http://127.0.0.1:1", "--no-sagas",
        home=tmp_path,
    )  # fmt: skip
    assert "in-cluster config" in one_error_line(result)


def test_an_unreachable_cluster_names_the_authentication_configmap(
    tmp_path: Path, serving: tuple[Path, Path]
) -> None:
    cert, key = serving
    kubeconfig = kubeconfig_to(tmp_path, f"https://127.0.0.1:{closed_port()}")
    result = serve(
        "--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
        "--etcd-servers", "http://127.0.0.1:1", "--no-sagas",
        "--kubeconfig", str(kubeconfig),
        home=tmp_path,
    )  # fmt: skip
    assert "kube-system/extension-apiserver-authentication" in one_error_line(result)


def test_a_bad_duration_is_a_usage_error_naming_the_value(
    tmp_path: Path, serving: tuple[Path, Path]
) -> None:
    cert, key = serving
    result = serve(
        "--tls-cert-file", str(cert), "--tls-private-key-file", str(key),
        "--etcd-servers", "http://127.0.0.1:1",
        "--authentication-token-webhook-cache-ttl", "ten",
        home=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "'ten' is not a duration" in result.stderr
