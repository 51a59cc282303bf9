"""A scripted chat model in its own thread, for the deploy tests of durable agents.

The deploy tests are synchronous, so the model serves from a thread
(`tests.support.threaded`), as `tests.support.steptarget` does. It speaks OpenAI's chat
completions (`GET /v1/models` for the probes, `POST /v1/chat/completions`) and plays a
two-turn agent over the key in the last user message: the first turn asks for the tool
`lookup` with `{"key": KEY}`, the turn after a tool result answers `found: RESULT`. Every
request is counted by key and turn (`asked(KEY, TURN)`, the turn being one more than the
assistant messages sent), and a test may `hold((KEY, TURN))` a turn until it `release`s
it: the count says whether a resumed call asked the model again for a turn that had
finished.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.threaded import QuietHandler, serving_in_thread

HOLD_SECONDS = 300.0
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


class ScriptedModel:
    """The counters and holds of the served model (thread-safe); `url` ends in `/v1`."""

    def __init__(self) -> None:
        self.url = ""
        self._asked: Counter[tuple[str, int]] = Counter()
        self._holds: dict[tuple[str, int], threading.Event] = {}
        self._lock = threading.Lock()

    def hold(self, key: str, turn: int) -> None:
        with self._lock:
            self._holds[(key, turn)] = threading.Event()

    def release(self, key: str, turn: int) -> None:
        with self._lock:
            event = self._holds.get((key, turn))
        if event is not None:
            event.set()

    def release_all(self) -> None:
        with self._lock:
            for event in self._holds.values():
                event.set()

    def asked(self, key: str, turn: int) -> int:
        with self._lock:
            return self._asked[(key, turn)]

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        key = users[-1] if users else ""  # a probe's request counts under no key
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        with self._lock:
            self._asked[(key, turn)] += 1
            held = self._holds.get((key, turn))
        if held is not None:
            held.wait(HOLD_SECONDS)
        results = [m["content"] for m in messages if m.get("role") == "tool"]
        if results:
            return {"role": "assistant", "content": f"found: {results[-1]}"}
        call = {
            "id": f"call_{key}",
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"key": key})},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}


def _handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_json({"object": "list", "data": [{"id": "scripted", "object": "model"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            message = model._answer(body)
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            self.send_json(
                {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "model": "scripted",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": USAGE,
                }
            )

    return Handler


@contextmanager
def serving_scripted_model() -> Iterator[ScriptedModel]:
    """A `ScriptedModel` on a free loopback port, shut down (holds released) on exit."""
    model = ScriptedModel()
    with serving_in_thread(_handler(model), name="scripted model") as url:
        model.url = f"{url}/v1"
        try:
            yield model
        finally:
            model.release_all()


def lookup_agent(tool_url: str, *, name: str = "lookup-agent") -> str:
    """A chat agent over `inputs.key` with one idempotent tool, `lookup`, a GET of
    `TOOL_URL/hold/KEY-tool` (held and counted by the step target)."""
    return f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: {name}, version: 1.0.0}}
inputs: {{type: object, properties: {{key: {{type: string}}}}, required: [key]}}
tools:
  - name: lookup
    description: Looks a key up.
    idempotent: true
    parameters:
      type: object
      properties: {{key: {{type: string}}}}
      required: [key]
    http:
      method: GET
      url: "{tool_url}/hold/{{{{ arguments.key }}}}-tool"
      body: null
      timeoutSeconds: 300
steps:
  - id: agent
    kind: model
    model: scripted
    prompt: "{{{{ inputs.key }}}}"
    tools: [lookup]
    maxTurns: 4
    cache: false
    timeoutSeconds: 600
output: steps.agent.output
"""
