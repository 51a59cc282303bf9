"""Kubeconfig loading with kubectl's rules, so `plnt` and `kubectl` reach the same server.

Which files: `--kubeconfig` alone when given (it must exist); else every file of
`KUBECONFIG` (a list separated by the OS path separator; missing files are
skipped); else `~/.kube/config`. Files are merged the way client-go merges them:
for `clusters`, `users` and `contexts` the first file that names an entry wins,
and `current-context` comes from the first file that sets it. `--context`
overrides `current-context`; the namespace is the context's (default
"default") unless `-n` overrides it. Relative paths inside an entry
(`certificate-authority`, `client-certificate`, `client-key`, `tokenFile`)
resolve against the directory of the file that defined the entry.

Inside a pod with no kubeconfig file, the pod's service account is used
(`in_cluster`), as kubectl and client-go do.

Everything is read here, once: `Connection` carries bytes, not paths, so TLS
setup never touches a kubeconfig again. Contradictions kubectl rejects (a file
and inline data for the same piece, a CA together with
`insecure-skip-tls-verify`, a certificate without its key) are rejected too.
Every failure is a `errors.KubeconfigError` naming the file and the missing
or bad piece.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from plnt.client.errors import KubeconfigError

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class Connection:
    """Everything needed to reach one server as one user, read from a kubeconfig."""

    server: str
    namespace: str = DEFAULT_NAMESPACE
    context: str = ""
    ca_data: bytes | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    client_certificate_data: bytes | None = None
    client_key_data: bytes | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    source: str = ""


@dataclass(frozen=True, slots=True)
class _Entry:
    """One named map entry and the file that defined it."""

    body: Mapping[str, Any]
    path: Path


@dataclass(slots=True)
class _Merged:
    clusters: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    current_context: str = ""
    files: list[Path] = field(default_factory=list)

    def describe(self) -> str:
        return ", ".join(str(p) for p in self.files) or "no kubeconfig file"


def kubeconfig_paths(
    explicit: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> tuple[list[Path], bool]:
    """The files to read, and whether they must exist (only an explicit file must)."""
    if explicit is not None and str(explicit):
        return [Path(explicit).expanduser()], True
    env = os.environ if environ is None else environ
    listed = env.get("KUBECONFIG", "")
    if listed:
        paths: list[Path] = []
        for part in listed.split(os.pathsep):
            if part and Path(part).expanduser() not in paths:
                paths.append(Path(part).expanduser())
        return paths, False
    return [(home or Path.home()) / ".kube" / "config"], False


SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where the kubelet mounts a pod's service account token, CA and namespace."""


def in_cluster(
    *,
    namespace: str | None = None,
    environ: Mapping[str, str] | None = None,
    root: Path = SERVICE_ACCOUNT,
) -> Connection:
    """The pod's own service account, as client-go's in-cluster config reads it.

    Used when no kubeconfig file exists and `KUBERNETES_SERVICE_HOST` is set (inside a
    pod), as kubectl does; the token is read once, at load.
    """
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeconfigError("in-cluster: KUBERNETES_SERVICE_HOST and _PORT must be set")
    where = f"in-cluster service account {root}"
    token = _read(root / "token", where, "token").decode().strip()
    ca = _read(root / "ca.crt", where, "ca.crt")
    try:
        own = (root / "namespace").read_text().strip()
    except OSError:
        own = ""
    server_host = f"[{host}]" if ":" in host else host
    return Connection(
        server=f"https://{server_host}:{port}",
        namespace=namespace or own or DEFAULT_NAMESPACE,
        context="in-cluster",
        ca_data=ca,
        token=token,
        source=where,
    )


def load(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    namespace: str | None = None,
    environ: Mapping[str, str] | None = None,
    home: Path | None = None,
) -> Connection:
    """Resolve the connection kubectl would use with the same flags and environment."""
    paths, required = kubeconfig_paths(kubeconfig, environ=environ, home=home)
    merged = _Merged()
    for path in paths:
        _merge(merged, path, required=required)
    env = os.environ if environ is None else environ
    if not merged.files and not context and env.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster(namespace=namespace, environ=env)
    name = context or merged.current_context
    if not name:
        raise KubeconfigError(
            f"{merged.describe()}: no current-context is set; pass --context or set "
            "current-context (is KUBECONFIG or --kubeconfig pointing at the right file?)"
        )
    ctx = merged.contexts.get(name)
    if ctx is None:
        raise KubeconfigError(f'{merged.describe()}: context "{name}" does not exist')
    cluster_name = _string(ctx, "cluster", ctx.body)
    if not cluster_name:
        raise KubeconfigError(f'{ctx.path}: context "{name}" names no cluster')
    cluster = merged.clusters.get(cluster_name)
    if cluster is None:
        raise KubeconfigError(
            f'{merged.describe()}: cluster "{cluster_name}" of context "{name}" does not exist'
        )
    user_name = _string(ctx, "user", ctx.body)
    user: _Entry | None = None
    if user_name:
        user = merged.users.get(user_name)
        if user is None:
            raise KubeconfigError(
                f'{merged.describe()}: user "{user_name}" of context "{name}" does not exist'
            )
    chosen_namespace = namespace or _string(ctx, "namespace", ctx.body) or DEFAULT_NAMESPACE
    return _connection(
        cluster_name, cluster, user_name, user, context=name, namespace=chosen_namespace
    )


def _merge(merged: _Merged, path: Path, *, required: bool) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise KubeconfigError(f"{path}: kubeconfig file does not exist") from None
        return
    except (OSError, UnicodeDecodeError) as error:
        raise KubeconfigError(f"{path}: cannot read kubeconfig: {error}") from error
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise KubeconfigError(f"{path}: not valid YAML: {error}") from error
    merged.files.append(path)
    if document is None:
        return
    if not isinstance(document, Mapping):
        raise KubeconfigError(f"{path}: a kubeconfig must be a YAML mapping")
    for key, target, inner in (
        ("clusters", merged.clusters, "cluster"),
        ("users", merged.users, "user"),
        ("contexts", merged.contexts, "context"),
    ):
        entries = document.get(key) or []
        if not isinstance(entries, list):
            raise KubeconfigError(f"{path}: {key} must be a list")
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise KubeconfigError(f"{path}: {key}[{index}] has no name")
            body = entry.get(inner) or {}
            if not isinstance(body, Mapping):
                raise KubeconfigError(f'{path}: {key}[{index}] ("{entry["name"]}") is malformed')
            target.setdefault(entry["name"], _Entry(body=body, path=path))
    current = document.get("current-context")
    if not merged.current_context and isinstance(current, str):
        merged.current_context = current


def _connection(
    cluster_name: str,
    cluster: _Entry,
    user_name: str,
    user: _Entry | None,
    *,
    context: str,
    namespace: str,
) -> Connection:
    where = f'{cluster.path}: cluster "{cluster_name}"'
    server = _string(cluster, "server", cluster.body)
    if not server:
        raise KubeconfigError(f"{where} has no server")
    if not server.startswith(("https://", "http://")):
        server = "https://" + server
    ca = _file_or_data(cluster, "certificate-authority", "certificate-authority-data", where)
    insecure = bool(cluster.body.get("insecure-skip-tls-verify", False))
    if insecure and ca is not None:
        raise KubeconfigError(
            f"{where}: certificate-authority and insecure-skip-tls-verify are both set; remove one"
        )
    tls_server_name = _string(cluster, "tls-server-name", cluster.body) or None
    cert = key = None
    token = username = password = None
    if user is not None:
        uwhere = f'{user.path}: user "{user_name}"'
        for unsupported in ("exec", "auth-provider"):
            if user.body.get(unsupported):
                raise KubeconfigError(f"{uwhere} uses {unsupported}, which plnt does not support")
        cert = _file_or_data(user, "client-certificate", "client-certificate-data", uwhere)
        key = _file_or_data(user, "client-key", "client-key-data", uwhere)
        if (cert is None) != (key is None):
            missing = "client-key" if key is None else "client-certificate"
            raise KubeconfigError(f"{uwhere} needs {missing} (or {missing}-data) too")
        token = _string(user, "token", user.body) or None
        token_file = _string(user, "tokenFile", user.body)
        if token is None and token_file:
            token = _read(user.path.parent / token_file, uwhere, "tokenFile").decode().strip()
            if not token:
                raise KubeconfigError(f"{uwhere}: tokenFile {token_file} is empty")
        username = _string(user, "username", user.body) or None
        password = _string(user, "password", user.body) or None
        if token and username:
            raise KubeconfigError(f"{uwhere} sets both a token and a username; remove one")
    return Connection(
        server=server.rstrip("/"),
        namespace=namespace,
        context=context,
        ca_data=ca,
        insecure_skip_tls_verify=insecure,
        tls_server_name=tls_server_name,
        client_certificate_data=cert,
        client_key_data=key,
        token=token,
        username=username,
        password=password,
        source=str(cluster.path),
    )


def _string(entry: _Entry, key: str, body: Mapping[str, Any]) -> str:
    value = body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise KubeconfigError(f"{entry.path}: {key} must be a string, not {value!r}")
    return value


def _file_or_data(entry: _Entry, file_key: str, data_key: str, where: str) -> bytes | None:
    path = _string(entry, file_key, entry.body)
    data = _string(entry, data_key, entry.body)
    if path and data:
        raise KubeconfigError(f"{where} sets both {file_key} and {data_key}; remove one")
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as error:
            raise KubeconfigError(f"{where}: {data_key} is not valid base64") from error
    if path:
        return _read(entry.path.parent / Path(path).expanduser(), where, file_key)
    return None


def _read(path: Path, where: str, key: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise KubeconfigError(f"{where}: cannot read {key} {path}: {error.strerror}") from error
