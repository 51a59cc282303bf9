"""A judge stand-in: an HTTP server speaking the OpenAI chat completions API whose
preferences are scripted.

This is a stand-in, not a model: no instruction-tuned model is available to these tests
(the session's Gemma 3 270M is a base model that follows no rubric), so the judge
protocol (`plnt.sagas.gating.judging`: the prompt, two asks with the order swapped, the reply
read as A, B or T) is tested against a server whose preference is a rule the test
chooses. It reads answers A and B out of the user message exactly as plnt writes them,
and records every request so tests can check what the judge was asked (rubric, model,
temperature, both orders).

Preferences:

* `prefer(marker)`: the answer containing `marker` wins (T when both or neither do);
* `always(letter)`: a judge with total position bias, always answering `letter`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

Preference = Callable[[str, str], str]
"""(answer A, answer B) → the reply text."""

_ANSWERS = re.compile(r"Answer A:\n(?P<a>.*)\n\nAnswer B:\n(?P<b>.*)\n\nWhich answer", re.S)


def prefer(marker: str) -> Preference:
    def choose(a: str, b: str) -> str:
        if (marker in a) == (marker in b):
            return "T"
        return "A" if marker in a else "B"

    return choose


def always(letter: str) -> Preference:
    return lambda a, b: letter


@dataclass
class JudgeStandIn:
    """The running stand-in: its `/v1` base URL and the requests it was sent."""

    endpoint: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@asynccontextmanager
async def judge_stand_in(preference: Preference) -> AsyncIterator[JudgeStandIn]:
    """Serve the stand-in on a free loopback port for the block."""
    found: list[JudgeStandIn] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        found[0].requests.append(body)
        user = body["messages"][-1]["content"]
        matched = _ANSWERS.search(user)
        if matched is None:
            return web.json_response({"error": {"message": "no answers A and B"}}, status=400)
        reply = preference(matched["a"], matched["b"])
        return web.json_response(
            {
                "id": "stand-in",
                "object": "chat.completion",
                "model": body.get("model", "stand-in"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        found.append(JudgeStandIn(str(server.make_url("/v1"))))
        yield found[0]
    finally:
        await server.close()
