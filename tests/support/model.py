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
`continue_spec()` is a workflow whose tokens stream (its output is the completion step's).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from plnt.processes import models, weights
from plnt.processes.modelserver import ModelServer

PIN = models.GEMMA3_270M
COUNTING = "1, 2, 3, 4,"
"""A prefix this base model continues with ` 5, 6, 7, …` at temperature 0."""


def continue_spec(*, max_tokens: int = 12, name: str = "continue") -> str:
    """A workflow whose output *is* one completion step's output, so its tokens stream as
    the model generates them (`examples/complete.workflow.yaml` ends in a transform, which
    streams nothing until it is done). A chat's last user message (or a text completion's
    prompt) is the prefix; temperature 0 and seed 0 make the continuation reproducible."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: {name}}}
inputs: {{type: object, properties: {{prefix: {{type: string}}}}, required: [prefix]}}
chat: {{input: prefix}}
steps:
  - id: more
    kind: model
    mode: completion
    prompt: "{{{{ inputs.prefix }}}}"
    maxTokens: {max_tokens}
    temperature: 0
    seed: 0
output: steps.more.output
smoke:
  inputs: {{prefix: "{COUNTING}"}}
  expect: {{contains: "5"}}
"""


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
