"""Generated requests from plnt's own OpenAPI document, against a real `plnt up` (real etcd).

schemathesis reads `/openapi/v3/apis/plnt.work/v1` as the server publishes it and
generates requests for every operation (valid and invalid bodies, parameters, path
names), derandomized and bounded so the run is the same every time and takes well
under a minute. Whatever it sends, the server must never answer 5xx, and every error
it answers must be a metav1.Status whose code is the HTTP status. A few objects are
created first so the generated names sometimes hit something real.

Scope, each for a stated reason:
* `abort`, `promote` and `retry` signal the deploy saga; this server runs without
  sagas (no Temporal, to keep the run short), where they answer 503 by design.
* `proxy` is the OpenAI-compatible endpoint: its errors are OpenAI's error objects,
  so the SDK can read them; it is still held to "no 5xx".
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
import schemathesis.specs.openapi.analysis  # loaded at collection (see below)
from requests.adapters import HTTPAdapter

from tests.support.plnt_server import PlntServer

# schemathesis is a pytest plugin, so pytest rewrites its modules as they are imported;
# importing the part `from_dict` loads lazily here, at collection, keeps that compile out
# of the test, where CPython 3.11's AST builder can trip on the recursion depth a deep
# test left behind ("AST constructor recursion depth mismatch").
EXAMPLES_PER_OPERATION = 38
SAGA_ONLY = ("/abort", "/promote", "/retry")
OPENAI_SHAPED = ("/proxy",)
AT_LEAST = 1000
DIGEST = "sha256:" + "ab" * 32


class _TLSAdapter(HTTPAdapter):
    """requests with the server's CA and the admin client certificate, as one SSL context."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._context = context
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)


@dataclass
class Findings:
    sent: int = 0
    server_errors: list[str] = field(default_factory=list)
    not_a_status: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlntServer]:
    with PlntServer(tmp_path_factory.mktemp("plnt-schemathesis")) as srv:
        yield srv


@pytest.fixture(scope="module")
def session(server: PlntServer) -> Iterator[requests.Session]:
    context = ssl.create_default_context(cafile=str(server.pki_dir / "ca.crt"))
    context.load_cert_chain(server.pki_dir / "admin.crt", server.pki_dir / "admin.key")
    with requests.Session() as client:
        client.mount("https://", _TLSAdapter(context))
        yield client


def _seed(server: PlntServer, session: requests.Session) -> None:
    base = server.url + "/apis/plnt.work/v1/namespaces/default"
    for name in ("a", "b"):
        run = {
            "apiVersion": "plnt.work/v1",
            "kind": "WorkflowRun",
            "metadata": {"name": name},
            "spec": {"workflow": {"ref": "oci://r.example/wf:1", "digest": DIGEST}},
        }
        assert session.post(f"{base}/workflowruns", json=run).status_code == 201
        backend = {
            "apiVersion": "plnt.work/v1",
            "kind": "PlntBackend",
            "metadata": {"name": name},
            "spec": {"kind": "ollama", "endpoint": "http://127.0.0.1:9"},
        }
        session.post(f"{base}/plntbackends", json=backend)


def _is_watch(query: dict[str, Any] | None) -> bool:
    """Whether kube reads the query as a watch (any `watch` value but false and 0)."""
    value = (query or {}).get("watch")
    if isinstance(value, list):
        value = value[0] if value else None
    return value is not None and str(value).lower() not in ("false", "0")


def _describe(case: Any, status: int, text: str) -> str:
    request = f"{case.method} {case.formatted_path} query={case.query} body={case.body!r:.300}"
    return f"{request} -> {status} {text[:300]}"


def test_generated_requests_never_get_a_5xx_and_every_error_is_a_status(
    server: PlntServer, session: requests.Session
) -> None:
    _seed(server, session)
    document = session.get(server.url + "/openapi/v3/apis/plnt.work/v1").json()
    schema = schemathesis.openapi.from_dict(document)
    findings = Findings()
    operations = [
        op
        for op in (result.ok() for result in schema.get_all_operations())
        if not op.path.endswith(SAGA_ONLY)
    ]
    assert len(operations) >= 25, [op.label for op in operations]

    for operation in operations:

        @hypothesis.settings(
            max_examples=EXAMPLES_PER_OPERATION,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        )
        @hypothesis.given(case=operation.as_strategy())
        def exercise(case: Any) -> None:
            if case.operation.method.upper() == "GET" and _is_watch(case.query):
                case.query["timeoutSeconds"] = "1"  # a watch streams until then
            response = case.call(base_url=server.url, session=session, timeout=30)
            findings.sent += 1
            status, text = response.status_code, response.text
            if status >= 500:
                findings.server_errors.append(_describe(case, status, text))
            elif status >= 400 and not case.operation.path.endswith(OPENAI_SHAPED):
                try:
                    body = json.loads(text)
                except ValueError:
                    body = None
                if not (
                    isinstance(body, dict)
                    and body.get("kind") == "Status"
                    and body.get("apiVersion") == "v1"
                    and body.get("code") == status
                ):
                    findings.not_a_status.append(_describe(case, status, text))

        exercise()

    assert findings.sent >= AT_LEAST, findings.sent
    assert findings.server_errors == [], "\n".join(findings.server_errors)
    assert findings.not_a_status == [], "\n".join(findings.not_a_status)
