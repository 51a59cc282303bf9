"""A stand-in for the two things Helm's `lookup` asks kube-apiserver for.

It replaces kube-apiserver only for `lookup "v1" "Secret" NS NAME` during a
cluster-aware render (`helm_python.Config.render`): core/v1 discovery
(`GET /api/v1`, which Helm reads to map the kind to its resource) and
`GET /api/v1/namespaces/{ns}/secrets/{name}`, answering from `secrets`, with a
NotFound Status otherwise. Plain HTTP on a free loopback port; every request path
is recorded so tests can see that the chart looked. Nothing else of the Kubernetes
API is served, so it stands in for an upgrade's lookups only, not for an install.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_CORE_V1 = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "secrets",
            "singularName": "secret",
            "namespaced": True,
            "kind": "Secret",
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }
    ],
}


@dataclass
class KubeStandin:
    url: str
    secrets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)


def _handler(state: KubeStandin) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            state.requests.append(path)
            parts = path.strip("/").split("/")
            body: dict[str, Any] | None = None
            if path == "/api/v1":
                body = _CORE_V1
            elif (
                len(parts) == 6
                and parts[:3] == ["api", "v1", "namespaces"]
                and parts[4] == "secrets"
            ):
                body = state.secrets.get((parts[3], parts[5]))
            if body is None:
                self._reply(
                    404,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "NotFound",
                        "code": 404,
                    },
                )
            else:
                self._reply(200, body)

        def _reply(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextlib.contextmanager
def kube_standin() -> Iterator[KubeStandin]:
    state = KubeStandin(url="")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, name="kube-standin", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
