"""HTTP stand-ins for synchronous tests, each served from a thread of its own.

The deploy tests are synchronous, so a stand-in they call (a step target, a scripted
model) cannot share their event loop: `serving_in_thread(handler, name=...)` serves a
`BaseHTTPRequestHandler` class from a `ThreadingHTTPServer` on a free loopback port,
yields its base URL, and shuts the server down, closes it and joins its thread on exit.
`QuietHandler` logs nothing and answers JSON with `send_json`, ignoring a caller that
went away (its runner or worker killed, its call cancelled).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing and answers JSON documents."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_json(self, document: Any) -> None:
        """Answer 200 with `document` as JSON; a caller that went away is no error."""
        data = json.dumps(document).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass


@contextmanager
def serving_in_thread(handler: type[BaseHTTPRequestHandler], *, name: str) -> Iterator[str]:
    """`handler` on a free loopback port, served from a thread named `name`: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
