"""The model server child's entry point: llama-cpp-python's OpenAI server, plus its load.

`python -m plnt.processes.llamaserving ARGS` takes exactly the arguments of
`python -m llama_cpp.server` and serves the same FastAPI app (built by llama-cpp-python's
own `create_app`, which loads the model before the port opens), wrapped in one ASGI layer
that adds what plnt's backend probes need and llama-cpp-python does not offer:

* `GET /metrics`, Prometheus text: `plnt_model_requests_running` and
  `plnt_model_requests_waiting` (gauges, one sample labelled with the model) and
  `plnt_model_requests_total` (a counter of generation requests finished). A generation
  request is a POST to `/v1/completions` or `/v1/chat/completions`; it counts from its
  arrival until its answer (the whole stream) is sent. The server generates for one
  request at a time (a lock around the model), so of the requests in flight one runs and
  the rest wait.
* `GET /v1/models` answered here, without waiting for the model's lock. llama-cpp-python
  takes the lock for it, so a probe asking while a long answer streams waited for the end
  of it (or timed out and called a busy server unreachable). The model is loaded before
  the port opens, so the list is as true here as it is behind the lock.

Everything else goes to llama-cpp-python untouched. Running inside the child (no proxy
hop in front of it) keeps the generation path exactly llama-cpp-python's.

Imports llama-cpp-python and uvicorn (the `llm` extra): only the child imports this module.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

GENERATING = frozenset({"/v1/completions", "/v1/chat/completions"})
METRICS_PATH = "/metrics"
MODELS_PATH = "/v1/models"
PROMETHEUS_TEXT = b"text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Load:
    """Generation requests in flight and finished (one event loop: no lock needed)."""

    in_flight: int = 0
    finished: int = 0

    @property
    def running(self) -> int:
        return min(self.in_flight, 1)

    @property
    def waiting(self) -> int:
        return self.in_flight - self.running


def metrics_text(load: Load, *, model: str) -> str:
    """The load as Prometheus text (see the module docstring)."""
    label = '{model="' + model.replace("\\", "\\\\").replace('"', '\\"') + '"}'
    return (
        "# HELP plnt_model_requests_running Generation requests the model is serving"
        " (one at a time).\n"
        "# TYPE plnt_model_requests_running gauge\n"
        f"plnt_model_requests_running{label} {load.running}\n"
        "# HELP plnt_model_requests_waiting Generation requests waiting for the model.\n"
        "# TYPE plnt_model_requests_waiting gauge\n"
        f"plnt_model_requests_waiting{label} {load.waiting}\n"
        "# HELP plnt_model_requests_total Generation requests answered.\n"
        "# TYPE plnt_model_requests_total counter\n"
        f"plnt_model_requests_total{label} {load.finished}\n"
    )


def models_body(aliases: list[str]) -> bytes:
    """`/v1/models` as llama-cpp-python answers it."""
    data = [{"id": a, "object": "model", "owned_by": "me", "permissions": []} for a in aliases]
    return json.dumps({"object": "list", "data": data}).encode()


async def _answer(send: Send, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def instrument(app: Asgi, *, aliases: list[str], load: Load | None = None) -> Asgi:
    """`app` with the load counted and `/metrics` and `/v1/models` answered here."""
    counted = load if load is not None else Load()
    models = models_body(aliases)
    model = aliases[0] if aliases else ""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        if method == "GET" and path == METRICS_PATH:
            await _answer(send, metrics_text(counted, model=model).encode(), PROMETHEUS_TEXT)
        elif method == "GET" and path == MODELS_PATH:
            await _answer(send, models, b"application/json")
        elif method == "POST" and path in GENERATING:
            counted.in_flight += 1
            try:
                await app(scope, receive, send)
            finally:
                counted.in_flight -= 1
                counted.finished += 1
        else:
            await app(scope, receive, send)

    return wrapped


def main() -> None:
    """Parse llama-cpp-python's arguments, build its app, serve it instrumented."""
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.cli import add_args_from_model
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    parser = argparse.ArgumentParser(prog="python -m plnt.processes.llamaserving")
    add_args_from_model(parser, Settings)
    args = parser.parse_args()
    # As llama-cpp-python's own `parse_model_from_args` (whose annotation mypy refuses).
    given = {key: value for key, value in vars(args).items() if value is not None}
    server_settings = ServerSettings(
        **{k: v for k, v in given.items() if k in ServerSettings.model_fields}
    )
    model_settings = ModelSettings(
        **{k: v for k, v in given.items() if k in ModelSettings.model_fields}
    )
    app = create_app(server_settings=server_settings, model_settings=[model_settings])
    alias = model_settings.model_alias or model_settings.model
    # Host and port as the arguments say, never from `HOST`/`PORT` (llama-cpp-python's own
    # `__main__` reads those): the parent builds this process's environment, and the
    # command line is the one place a setting comes from (`plnt.processes.environments`).
    uvicorn.run(
        instrument(app, aliases=[alias]), host=server_settings.host, port=server_settings.port
    )


if __name__ == "__main__":
    main()
