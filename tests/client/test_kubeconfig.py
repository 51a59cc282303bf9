"""Kubeconfig loading follows kubectl: file lists, merging, contexts, namespaces, paths."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from plnt.client import KubeconfigError, kubeconfig

PEM = b"-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n"


def config(
    *,
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": k, "cluster": v} for k, v in (clusters or {}).items()],
        "users": [{"name": k, "user": v} for k, v in (users or {}).items()],
        "contexts": [{"name": k, "context": v} for k, v in (contexts or {}).items()],
    }
    if current is not None:
        document["current-context"] = current
    return document


def write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def simple(server: str = "https://one.example:6443", **context: Any) -> dict[str, Any]:
    return config(
        clusters={"c": {"server": server}},
        users={"u": {"token": "t"}},
        contexts={"ctx": {"cluster": "c", "user": "u", **context}},
        current="ctx",
    )


def test_the_first_file_of_kubeconfig_wins_for_each_entry_and_for_current_context(
    tmp_path: Path,
) -> None:
    first = write(
        tmp_path / "a",
        config(
            clusters={"shared": {"server": "https://first.example"}},
            contexts={"one": {"cluster": "shared", "user": "alice"}},
            current="one",
        ),
    )
    second = write(
        tmp_path / "b",
        config(
            clusters={"shared": {"server": "https://second.example"}},
            users={"alice": {"token": "from-second"}},
            contexts={"two": {"cluster": "shared", "user": "alice"}},
            current="two",
        ),
    )
    env = {"KUBECONFIG": os.pathsep.join([str(first), str(tmp_path / "missing"), str(second)])}
    connection = kubeconfig.load(environ=env)
    assert connection.context == "one"
    assert connection.server == "https://first.example"
    assert connection.token == "from-second"


def test_an_explicit_kubeconfig_replaces_the_kubeconfig_variable(tmp_path: Path) -> None:
    listed = write(tmp_path / "listed", simple("https://listed.example"))
    explicit = write(tmp_path / "explicit", simple("https://explicit.example"))
    connection = kubeconfig.load(explicit, environ={"KUBECONFIG": str(listed)})
    assert connection.server == "https://explicit.example"


def test_a_missing_explicit_kubeconfig_is_an_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=r"nowhere.*does not exist"):
        kubeconfig.load(tmp_path / "nowhere", environ={})


def test_without_kubeconfig_variable_the_home_config_is_read(tmp_path: Path) -> None:
    write(tmp_path / ".kube" / "config", simple("https://home.example"))
    assert kubeconfig.load(environ={}, home=tmp_path).server == "https://home.example"


def test_without_any_context_the_error_says_how_to_choose_one(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="no current-context"):
        kubeconfig.load(environ={}, home=tmp_path)


def test_context_flag_overrides_current_context_and_unknown_contexts_are_named(
    tmp_path: Path,
) -> None:
    document = simple()
    document["clusters"].append({"name": "c2", "cluster": {"server": "https://two.example"}})
    document["contexts"].append({"name": "other", "context": {"cluster": "c2"}})
    path = write(tmp_path / "config", document)
    chosen = kubeconfig.load(path, context="other")
    assert (chosen.server, chosen.token) == ("https://two.example", None)
    with pytest.raises(KubeconfigError, match='context "absent" does not exist'):
        kubeconfig.load(path, context="absent")


def test_namespace_comes_from_the_context_defaults_to_default_and_yields_to_the_flag(
    tmp_path: Path,
) -> None:
    with_ns = write(tmp_path / "a", simple(namespace="team"))
    without = write(tmp_path / "b", simple())
    assert kubeconfig.load(with_ns).namespace == "team"
    assert kubeconfig.load(without).namespace == "default"
    assert kubeconfig.load(with_ns, namespace="override").namespace == "override"


def test_relative_paths_resolve_against_the_kubeconfig_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "kube"
    (home / "pki").mkdir(parents=True)
    (home / "pki" / "ca.crt").write_bytes(PEM)
    (home / "pki" / "me.crt").write_bytes(b"CERT")
    (home / "pki" / "me.key").write_bytes(b"KEY")
    (home / "token").write_text("file-token\n")
    path = write(
        home / "config",
        config(
            clusters={"c": {"server": "https://x.example", "certificate-authority": "pki/ca.crt"}},
            users={
                "cert": {"client-certificate": "pki/me.crt", "client-key": "pki/me.key"},
                "tok": {"tokenFile": "token"},
            },
            contexts={"a": {"cluster": "c", "user": "cert"}, "b": {"cluster": "c", "user": "tok"}},
            current="a",
        ),
    )
    monkeypatch.chdir(tmp_path)
    with_cert = kubeconfig.load(path)
    assert with_cert.ca_data == PEM
    assert (with_cert.client_certificate_data, with_cert.client_key_data) == (b"CERT", b"KEY")
    assert kubeconfig.load(path, context="b").token == "file-token"


def test_inline_data_is_decoded_and_a_token_wins_over_a_token_file(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config",
        config(
            clusters={
                "c": {
                    "server": "https://x.example",
                    "certificate-authority-data": base64.b64encode(PEM).decode(),
                    "tls-server-name": "plnt.internal",
                }
            },
            users={"u": {"token": "inline", "tokenFile": "absent-file"}},
            contexts={"ctx": {"cluster": "c", "user": "u"}},
            current="ctx",
        ),
    )
    connection = kubeconfig.load(path)
    assert connection.ca_data == PEM
    assert connection.token == "inline"
    assert connection.tls_server_name == "plnt.internal"


@pytest.mark.parametrize(
    ("cluster", "user", "message"),
    [
        ({}, {}, r'cluster "c" has no server'),
        (
            {
                "server": "https://x",
                "certificate-authority": "a",
                "certificate-authority-data": "b",
            },
            {},
            "both certificate-authority and certificate-authority-data",
        ),
        (
            {
                "server": "https://x",
                "certificate-authority-data": "AA==",
                "insecure-skip-tls-verify": True,
            },
            {},
            "insecure-skip-tls-verify are both set",
        ),
        ({"server": "https://x"}, {"client-certificate-data": "AA=="}, "needs client-key"),
        (
            {"server": "https://x"},
            {"client-key-data": "%%%"},
            "client-key-data is not valid base64",
        ),
        (
            {"server": "https://x"},
            {"client-certificate": "gone.crt", "client-key": "k"},
            "cannot read client-certificate",
        ),
        ({"server": "https://x"}, {"exec": {"command": "x"}}, "uses exec"),
    ],
)
def test_unusable_entries_are_rejected_naming_the_file_and_the_piece(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], message: str
) -> None:
    path = write(
        tmp_path / "config",
        config(
            clusters={"c": cluster},
            users={"u": user},
            contexts={"ctx": {"cluster": "c", "user": "u"}},
            current="ctx",
        ),
    )
    with pytest.raises(KubeconfigError, match=message) as caught:
        kubeconfig.load(path)
    assert str(path) in str(caught.value)


def test_a_context_naming_a_missing_user_is_an_error(tmp_path: Path) -> None:
    document = simple()
    document["contexts"][0]["context"]["user"] = "ghost"
    with pytest.raises(KubeconfigError, match='user "ghost" of context "ctx" does not exist'):
        kubeconfig.load(write(tmp_path / "config", document))


def test_malformed_yaml_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("clusters: [unclosed\n")
    with pytest.raises(KubeconfigError, match=f"{path}: not valid YAML"):
        kubeconfig.load(path)


def service_account(tmp_path: Path) -> Path:
    root = tmp_path / "serviceaccount"
    root.mkdir()
    (root / "token").write_text("sa-token\n")
    (root / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nca\n")
    (root / "namespace").write_text("plnt-system")
    return root


def test_inside_a_pod_without_a_kubeconfig_the_service_account_is_used(tmp_path: Path) -> None:
    root = service_account(tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    connection = kubeconfig.in_cluster(environ=env, root=root)
    assert connection.server == "https://10.96.0.1:443"
    assert (connection.token, connection.namespace) == ("sa-token", "plnt-system")
    assert connection.ca_data == (root / "ca.crt").read_bytes()
    ipv6 = kubeconfig.in_cluster(
        environ={**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}, root=root, namespace="other"
    )
    assert (ipv6.server, ipv6.namespace) == ("https://[fd00::1]:443", "other")


def test_a_kubeconfig_file_wins_over_the_pod_and_no_pod_means_no_in_cluster(
    tmp_path: Path,
) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(KubeconfigError, match="cannot read token"):
        kubeconfig.load(environ=env, home=tmp_path)  # no ~/.kube/config: in-cluster is tried
    with pytest.raises(KubeconfigError, match="no current-context"):
        kubeconfig.load(environ={}, home=tmp_path)
