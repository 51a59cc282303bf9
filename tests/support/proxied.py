"""The OpenAI SDK's view of a run's `proxy` subresource: an API server with a token file,
the SDK clients pointed at a run, and the chat example's runner on the streaming stand-in.

The fixtures (`proxy_stack`, `llm`) are the API server package's (tests/apiserver/conftest.py).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from tests.support.api_server import BASE, Api
from tests.support.examples import EXAMPLES
from tests.support.llm import LLM
from tests.support.runners import runner_process

CHAT_SPEC = str(EXAMPLES / "chat.workflow.yaml")
ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"


@dataclass
class ProxyStack:
    api: Api
    token_file: Path

    def base_url(self, name: str) -> str:
        return f"{self.api.url}{BASE}/{name}/proxy/v1"

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.api.pki.ca_cert))

    def client(self, name: str, token: str = ALICE) -> openai.AsyncOpenAI:
        http = openai.DefaultAsyncHttpxClient(verify=self.tls())
        return openai.AsyncOpenAI(
            base_url=self.base_url(name), api_key=token, http_client=http, max_retries=0
        )

    def sync_client(self, name: str, token: str = ALICE) -> openai.OpenAI:
        http = openai.DefaultHttpxClient(verify=self.tls())
        return openai.OpenAI(
            base_url=self.base_url(name), api_key=token, http_client=http, max_retries=0
        )


def llm_runner(llm: LLM) -> Any:
    return runner_process(
        "--spec", CHAT_SPEC, "--backend-type", "openai", "--endpoint", llm.url, "--model", "m"
    )


async def log_of(api: Api, name: str) -> list[dict[str, Any]]:
    reply = await api.call("GET", f"{BASE}/{name}/invocationlog")
    items: list[dict[str, Any]] = reply.json["items"]
    return items
