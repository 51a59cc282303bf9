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
  the rest wait. A backend probe's own call (header `X-Plnt-Probe`, `plnt.api.headers`:
  the small streamed chat call that times the first token) is counted apart, in
  `plnt_model_probes_total`, and nowhere else: these figures say what callers asked of
  the model, so a test or a user counting the calls that reached it sees only theirs, and
  the load the probes report (running, waiting) is the callers' load, not the probe's own.
* `GET /v1/models` answered here, without waiting for the model's lock. llama-cpp-python
  takes the lock for it, so a probe asking while a long answer streams waited for the end
  of it (or timed out and called a busy server unreachable). The model is loaded before
  the port opens, so the list is as true here as it is behind the lock.
* `POST /extras/tokenize/count` answered here too, from a tokenizer of its own (the same
  weights file loaded `vocab_only`, so the count is the server's), without the lock: the
  runner counts a streamed completion's prompt once the stream has ended
  (`plnt.runner.counting`), and behind the lock that count would wait for every
  generation queued meanwhile.
* Model output is text. A generation request gets a `logit_bias` of -100 (OpenAI's "never")
  on the vocabulary's tokens that are not text (`Vocabulary.suppressed`): control tokens
  that do not end generation (`<start_of_turn>`, `<pad>`, …: llama.cpp renders them as
  nothing, so they only cost a token and break a count of one token per delta) and the
  markers the model's pin names (Gemma 3's `<start_of_image>`: llama.cpp marks it a
  user-defined token, like `<table>`, and renders it as text, so a base model continuing
  text sent `…and blue<start_of_image>The red…` to callers). Why at sampling and not by
  deleting the text afterwards: the model then picks the best token that *is* text, the
  answer stays one coherent piece, and every generated token is a delta with text, so the
  reported and the counted usage both stay exact. A caller's own `logit_bias` is kept,
  and the ban wins over it.

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

from plnt.api.headers import PROBE_HEADER
from plnt.processes import models

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

GENERATING = frozenset({"/v1/completions", "/v1/chat/completions"})
METRICS_PATH = "/metrics"
MODELS_PATH = "/v1/models"
COUNT_PATH = "/extras/tokenize/count"
BANNED = -100.0
"""OpenAI's `logit_bias` value for a token that must never be sampled."""
_CONTROL, _USER_DEFINED, _UNUSED = 8, 16, 2
"""llama.cpp's token attributes (`llama_token_attr`) that matter here."""
PROMETHEUS_TEXT = b"text/plain; version=0.0.4; charset=utf-8"
_PROBE = PROBE_HEADER.lower().encode("latin-1")
"""The probe header as ASGI hands headers over (lower-case bytes)."""


@dataclass
class Load:
    """Generation requests in flight and finished (one event loop: no lock needed), and
    the backend probes' calls, counted apart (module docstring)."""

    in_flight: int = 0
    finished: int = 0
    probes: int = 0

    @property
    def running(self) -> int:
        return min(self.in_flight, 1)

    @property
    def waiting(self) -> int:
        return self.in_flight - self.running


class Vocabulary:
    """The served model's tokenizer, loaded on its own (`vocab_only`): counts prompts as the
    server does and says which tokens are not text (module docstring)."""

    def __init__(self, path: str, *, markers: tuple[str, ...] = ()) -> None:
        import llama_cpp

        self._llama = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
        vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        suppressed: dict[str, float] = {}
        for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
            attributes = llama_cpp.llama_vocab_get_attr(vocab, token)
            text = llama_cpp.llama_vocab_get_text(vocab, token).decode("utf-8", "replace")
            control = attributes & _CONTROL and not attributes & _UNUSED
            marker = attributes & _USER_DEFINED and text in markers
            if (control and not llama_cpp.llama_vocab_is_eog(vocab, token)) or marker:
                suppressed[str(token)] = BANNED
        self.suppressed = suppressed
        """Token id (as `logit_bias` keys it) → `BANNED`, for every token that is not text."""

    def texts_of_suppressed(self) -> list[str]:
        """The suppressed tokens as text (what a caller must never see)."""
        return [
            self._llama.detokenize([int(token)], special=True).decode("utf-8", "replace")
            for token in self.suppressed
        ]

    def count(self, text: str) -> int:
        """Tokens in `text` as the server's `/extras/tokenize/count` counts them (BOS too)."""
        return len(self._llama.tokenize(text.encode("utf-8"), special=True))


def with_suppressed(body: Any, suppressed: dict[str, float]) -> Any:
    """A generation request's JSON with the suppressed tokens banned in its `logit_bias`
    (merged: the caller's other biases kept, the ban winning); anything that is not a JSON
    object is left for llama-cpp-python to refuse. A request that biases by token text
    (`logit_bias_type: tokens`) keeps its own biases only: its keys are not token ids."""
    if not isinstance(body, dict) or not suppressed:
        return body
    if body.get("logit_bias_type") == "tokens":
        return body
    given = body.get("logit_bias")
    merged = dict(given) if isinstance(given, dict) else {}
    merged.update(suppressed)
    return {**body, "logit_bias": merged}


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
        "# HELP plnt_model_probes_total Backend probes' calls answered (X-Plnt-Probe),"
        " counted in no other figure.\n"
        "# TYPE plnt_model_probes_total counter\n"
        f"plnt_model_probes_total{label} {load.probes}\n"
    )


def is_probe(scope: Scope) -> bool:
    """Whether a request carries the backend probe's header (`PROBE_HEADER`)."""
    return any(key.lower() == _PROBE for key, _ in scope.get("headers", []))


def models_body(aliases: list[str]) -> bytes:
    """`/v1/models` as llama-cpp-python answers it."""
    data = [{"id": a, "object": "model", "owned_by": "me", "permissions": []} for a in aliases]
    return json.dumps({"object": "list", "data": data}).encode()


async def _answer(send: Send, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _read_body(receive: Receive) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body)
        body += message.get("body", b"")
        if not message.get("more_body"):
            return bytes(body)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that answers `body` once, then what the connection says (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _count(receive: Receive, send: Send, vocabulary: Vocabulary) -> None:
    try:
        request = json.loads(await _read_body(receive))
        text = request["input"]
        if not isinstance(text, str):
            raise TypeError("input")
    except (ValueError, KeyError, TypeError):
        problem = {"detail": "the body must be a JSON object with a string `input`"}
        body = json.dumps(problem).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 422, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    answer = json.dumps({"count": vocabulary.count(text)}).encode()
    await _answer(send, answer, b"application/json")


def _without_length(scope: Scope) -> Scope:
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
    return {**scope, "headers": headers}


def instrument(
    app: Asgi,
    *,
    aliases: list[str],
    load: Load | None = None,
    vocabulary: Vocabulary | None = None,
) -> Asgi:
    """`app` with the load counted, `/metrics` and `/v1/models` answered here and, given
    the model's `vocabulary`, prompt counts answered here and non-text tokens banned."""
    counted = load if load is not None else Load()
    models = models_body(aliases)
    model = aliases[0] if aliases else ""

    async def generate(scope: Scope, receive: Receive, send: Send) -> None:
        if vocabulary is None or not vocabulary.suppressed:
            await app(scope, receive, send)
            return
        raw = await _read_body(receive)
        try:
            body = json.dumps(with_suppressed(json.loads(raw), vocabulary.suppressed)).encode()
        except ValueError:
            body = raw  # not JSON: llama-cpp-python words the refusal
        headers = _without_length(scope)["headers"]
        headers.append((b"content-length", str(len(body)).encode()))
        await app({**scope, "headers": headers}, _replaying(body, receive), send)

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        if method == "GET" and path == METRICS_PATH:
            await _answer(send, metrics_text(counted, model=model).encode(), PROMETHEUS_TEXT)
        elif method == "GET" and path == MODELS_PATH:
            await _answer(send, models, b"application/json")
        elif method == "POST" and path == COUNT_PATH and vocabulary is not None:
            await _count(receive, send, vocabulary)
        elif method == "POST" and path in GENERATING and is_probe(scope):
            try:
                await generate(scope, receive, send)
            finally:
                counted.probes += 1
        elif method == "POST" and path in GENERATING:
            counted.in_flight += 1
            try:
                await generate(scope, receive, send)
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
    pin = models.CATALOG.get(alias)
    vocabulary = Vocabulary(model_settings.model, markers=pin.markers if pin else ())
    # Host and port as the arguments say, never from `HOST`/`PORT` (llama-cpp-python's own
    # `__main__` reads those): the parent builds this process's environment, and the
    # command line is the one place a setting comes from (`plnt.processes.environments`).
    uvicorn.run(
        instrument(app, aliases=[alias], vocabulary=vocabulary),
        host=server_settings.host,
        port=server_settings.port,
    )


if __name__ == "__main__":
    main()
