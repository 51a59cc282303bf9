"""A backend the stand-in's aggregator can proxy to: its serving TLS context.

`backend_context(kube, directory)` is the server side of an aggregated API: a serving
certificate for `SERVICE_DNS` from a throwaway CA (whose bundle the APIService gets), and
client certificates required, from the stand-in's front-proxy CA only.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from plnt.apiserver import pki
from tests.support.kube import standin

SERVICE_DNS = "echo-api.plnt-system.svc"


def backend_context(kube: standin.KubeStandIn, directory: Path) -> tuple[ssl.SSLContext, bytes]:
    ca = pki.CertificateAuthority.create("echo-ca")
    cert_pem, key_pem = pki.issue_serving_certificate(ca, sans=[SERVICE_DNS])
    (directory / "s.crt").write_bytes(cert_pem)
    (directory / "s.key").write_bytes(key_pem)
    context = ssl.create_default_context(
        ssl.Purpose.CLIENT_AUTH, cafile=str(kube.front_proxy_ca_cert)
    )
    context.load_cert_chain(directory / "s.crt", directory / "s.key")
    context.verify_mode = ssl.CERT_REQUIRED  # only the front proxy may call
    return context, ca.cert_pem
