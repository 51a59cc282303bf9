"""Steps that fail at invoke time: unreachable and hanging backends, HTTP steps, retries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from plnt.runner import calling, settings
from tests.support.examples import EXAMPLES
from tests.support.runners import StartRunner, openai_backend

ONE_MODEL_STEP = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: one}
inputs: {type: object, properties: {q: {type: string}}, required: [q]}
steps:
  - id: ask
    kind: model
    prompt: "{{ inputs.q }}"
    timeoutSeconds: 0.3
    retries: RETRIES
output: steps.ask.output
"""


@pytest.fixture
async def target_server() -> AsyncIterator[str]:
    """A small HTTP service for `http` steps: JSON, text and a failing route."""

    async def items(request: web.Request) -> web.Response:
        return web.json_response(
            {"id": request.match_info["id"], "auth": request.headers["X-Auth"]}
        )

    async def echo(request: web.Request) -> web.Response:
        return web.Response(text=(await request.text()).upper())

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    async def large(request: web.Request) -> web.StreamResponse:
        # Many writes, so the body reaches the runner in many chunks, as a real service's does.
        count = int(request.query["items"])
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"items": [')
        for index in range(count):
            await response.write((b"," if index else b"") + b'"' + b"x" * 1000 + b'"')
        await response.write(b"]}")
        return response

    app = web.Application()
    app.router.add_get("/items/{id}", items)
    app.router.add_post("/echo", echo)
    app.router.add_get("/broken", broken)
    app.router.add_get("/large", large)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


async def test_a_backend_on_a_closed_port_is_a_502_naming_the_step(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    closed_port: int,
) -> None:
    backend = openai_backend(f"http://127.0.0.1:{closed_port}/v1")
    url = await start_runner(write_spec(ONE_MODEL_STEP.replace("RETRIES", "1")), backend=backend)
    async with session.post(f"{url}/invoke", json={"inputs": {"q": "hi"}}) as response:
        assert response.status == 502
        body = await response.json()
    assert body["error"]["step"] == "ask"
    assert "step 'ask'" in body["error"]["message"]
    assert "unreachable" in body["error"]["message"]


async def test_a_backend_that_hangs_past_the_step_timeout_is_a_504_naming_the_step(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    hanging_server: str,
) -> None:
    backend = settings.BackendConfig(type="vllm", endpoint=f"{hanging_server}/v1", model="m")
    url = await start_runner(write_spec(ONE_MODEL_STEP.replace("RETRIES", "2")), backend=backend)
    async with session.post(f"{url}/invoke", json={"inputs": {"q": "hi"}}) as response:
        assert response.status == 504
        body = await response.json()
        assert "Server-Timing" in response.headers
    assert body["error"]["step"] == "ask"
    assert "timed out" in body["error"]["message"]
    assert "attempt 3" in body["error"]["message"]  # the first try and two retries


async def test_http_steps_render_url_headers_and_body_and_parse_json(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    target_server: str,
) -> None:
    spec = write_spec(f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: calls}}
inputs: {{type: object, properties: {{id: {{type: string}}}}}}
steps:
  - id: fetch
    kind: http
    url: "{target_server}/items/{{{{ inputs.id }}}}"
    headers: {{X-Auth: "token-{{{{ inputs.id }}}}"}}
  - id: shout
    kind: http
    method: POST
    needs: [fetch]
    url: "{target_server}/echo"
    body: "{{{{ steps.fetch.output | tojson }}}}"
output: '[steps.fetch.output.auth, steps.shout.output]'
""")
    url = await start_runner(spec)
    async with session.post(f"{url}/invoke", json={"inputs": {"id": "a1"}}) as response:
        assert response.status == 200
        body = await response.json()
    assert body["output"] == ["token-a1", '{"AUTH": "TOKEN-A1", "ID": "A1"}']
    assert {step["cache"] for step in body["trace"]} == {"off"}  # http caching is opt-in


async def test_an_http_step_answered_with_500_is_a_502_naming_the_step(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    target_server: str,
) -> None:
    spec = write_spec(f"""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: broken}}
steps:
  - {{id: call, kind: http, url: "{target_server}/broken"}}
output: steps.call.output
""")
    url = await start_runner(spec)
    async with session.post(f"{url}/invoke", json={"inputs": {}}) as response:
        assert response.status == 502
        body = await response.json()
    assert body["error"]["step"] == "call"
    assert "answered 500" in body["error"]["message"]


LARGE_ANSWER_SPEC = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: large}}
steps:
  - {{id: call, kind: http, url: "{url}"}}
output: steps.call.output
"""


async def test_an_http_step_reads_a_json_answer_of_many_chunks_whole(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    target_server: str,
) -> None:
    spec = write_spec(LARGE_ANSWER_SPEC.format(url=f"{target_server}/large?items=300"))
    url = await start_runner(spec)
    async with session.post(f"{url}/invoke", json={"inputs": {}}) as response:
        body = await response.json()
        assert response.status == 200, body
    assert len(body["output"]["items"]) == 300  # about 300 KiB, well past one read's chunk


async def test_an_http_answer_past_the_runners_limit_is_a_502_naming_the_limit(
    start_runner: StartRunner,
    session: aiohttp.ClientSession,
    write_spec: Callable[[str], Path],
    target_server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(calling, "MAX_HTTP_RESPONSE_BYTES", 100_000)
    spec = write_spec(LARGE_ANSWER_SPEC.format(url=f"{target_server}/large?items=300"))
    url = await start_runner(spec)
    async with session.post(f"{url}/invoke", json={"inputs": {}}) as response:
        assert response.status == 502
        body = await response.json()
    assert body["error"]["step"] == "call"
    assert "more than 100000 bytes" in body["error"]["message"]


async def test_a_template_failing_at_render_time_names_the_step(
    start_runner: StartRunner, session: aiohttp.ClientSession, write_spec: Callable[[str], Path]
) -> None:
    spec = write_spec("""
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: optional}
inputs: {type: object, properties: {name: {type: string}}}
steps:
  - {id: greet, kind: transform, template: "hello {{ inputs.name }}"}
output: steps.greet.output
""")
    url = await start_runner(spec)
    async with session.post(f"{url}/invoke", json={"inputs": {}}) as response:
        assert response.status == 500
        body = await response.json()
    assert body["error"]["step"] == "greet"
    assert "no attribute 'name'" in body["error"]["message"]


async def test_a_runner_refuses_to_start_when_model_steps_have_no_model(
    start_runner: StartRunner,
) -> None:
    backend = settings.BackendConfig(type="openai", endpoint="http://127.0.0.1:9/v1")
    with pytest.raises(settings.BackendConfigError, match="answer"):
        await start_runner(EXAMPLES / "chat.workflow.yaml", backend=backend)
