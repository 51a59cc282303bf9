"""Creating a Namespace on a standalone plnt before a test writes into it.

Standalone plnt refuses objects in a namespace that does not exist (kube's
NamespaceLifecycle), so fixtures that hand each test its own namespace create it
first: one HTTPS request with the admin certificate, cheaper than a kubectl process.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from plnt.apiserver import pki as pki_module


def create_namespace(url: str, pki_dir: Path, name: str) -> str:
    """Create namespace `name` on the server at `url` (an existing one is fine); returns it."""
    paths = pki_module.Pki.at(pki_dir)
    context = ssl.create_default_context(cafile=str(paths.ca_cert))
    context.load_cert_chain(str(paths.admin_cert), str(paths.admin_key))
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    request = urllib.request.Request(
        f"{url}/api/v1/namespaces",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as reply:
            reply.read()
    except urllib.error.HTTPError as error:
        if error.code != 409:
            raise
    return name
