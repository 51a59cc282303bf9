"""One real model server for the whole test session: plnt's own `ModelServer` on the pinned
Gemma 3 270M weights (`plnt.processes.models.GEMMA3_270M`).

Why one per session: loading the model takes about two seconds and 300 MB, and the server
answers one request at a time anyway, so every test that needs a real model shares it.
It is registered as a plugin in `tests/conftest.py`, so any test directory can ask for
the `model_server` fixture and get the same process. The fixture is the code under test
(it starts the server exactly as `plnt up --model` does: weights assembled by the
package, verified against plnt's pin, then spawned and waited for), and it stops the
server by its PID when the session ends, also after a failure.

`complete(server, prompt, ...)` and `tokenize_count(server, text)` call the server
directly, bypassing plnt: what tests compare plnt's answers and counts with;
the workflow whose tokens stream is `plnt.bench.continuations.spec_text`, which the model
benchmark runs too.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from plnt.bench import continuations
from plnt.processes import models, weights
from plnt.processes.modelserver import ModelServer

PIN = models.GEMMA3_270M
COUNTING = continuations.PROMPT
"""A prefix this base model continues with ` 5, 6, 7, …` at temperature 0."""


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """The session's model server, started on a free loopback port, stopped at the end."""
    path = weights.assemble(PIN)
    log_file = tmp_path_factory.mktemp("model-server") / f"{PIN.name}.log"
    server = ModelServer(PIN, path, log_file=log_file)
    try:
        asyncio.run(server.astart())
        yield server
    finally:
        server.stop()


def post(url: str, body: dict[str, Any], *, timeout: float = 60.0) -> Any:
    """POST JSON, answer the decoded JSON (the server's own answer, not plnt's)."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


def complete(server: ModelServer, prompt: str, **options: Any) -> Any:
    """A plain (not streamed) completion straight from the model server."""
    body = {"model": server.model, "prompt": prompt, "temperature": 0, **options}
    return post(f"{server.endpoint}/completions", body)


def tokenize_count(server: ModelServer, text: str) -> int:
    """The server's own count of the tokens of `text` (`POST /extras/tokenize/count`)."""
    return int(post(f"{server.root}/extras/tokenize/count", {"input": text})["count"])
