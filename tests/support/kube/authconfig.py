"""ConfigMap kube-system/extension-apiserver-authentication, as kube-apiserver writes it.

Part of the kube-apiserver stand-in (a test double: no kube-apiserver runs here).

The keys and encodings of kube's `clusterauthenticationtrust` controller: PEM bundles
for `client-ca-file` and `requestheader-client-ca-file`, and the request-header
settings as JSON arrays of strings (Go's json.Marshal: no spaces). No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

NAMESPACE = "kube-system"
NAME = "extension-apiserver-authentication"


def _strings(values: Sequence[str]) -> str:
    return json.dumps(list(values), separators=(",", ":"))


def data(
    *,
    client_ca: str,
    requestheader_ca: str,
    allowed_names: Sequence[str] = ("front-proxy-client",),
    username_headers: Sequence[str] = ("X-Remote-User",),
    uid_headers: Sequence[str] = ("X-Remote-Uid",),
    group_headers: Sequence[str] = ("X-Remote-Group",),
    extra_headers_prefix: Sequence[str] = ("X-Remote-Extra-",),
) -> dict[str, str]:
    return {
        "client-ca-file": client_ca,
        "requestheader-allowed-names": _strings(allowed_names),
        "requestheader-client-ca-file": requestheader_ca,
        "requestheader-extra-headers-prefix": _strings(extra_headers_prefix),
        "requestheader-group-headers": _strings(group_headers),
        "requestheader-uid-headers": _strings(uid_headers),
        "requestheader-username-headers": _strings(username_headers),
    }


def configmap(values: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "data": dict(values),
    }
