"""A runner deployed with its pool's other backends (`spillover`) serves a call the API
server spills (`X-Plnt-Spill-To`) from the backend it names, says so on its answer, and
ignores a name it was not deployed with (`plnt.runner.spilling`). Two OpenAI stand-ins
(`tests/support/llm.py`) tell by their prefixes and their request logs who answered."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pydantic
import pytest

from plnt.api.headers import SPILL_HEADER
from plnt.runner import settings
from tests.support.llm import LLM, serving_llm
from tests.support.runners import StartRunner, read_lines

SPEC = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {name: ask}
inputs: {type: object, properties: {q: {type: string}}, required: [q]}
steps:
  - id: answer
    kind: model
    prompt: "{{ inputs.q }}"
output: steps.answer.output
"""


@pytest.fixture
async def primary() -> AsyncIterator[LLM]:
    async with serving_llm(None, prefix="primary") as llm:
        yield llm


@pytest.fixture
async def spare() -> AsyncIterator[LLM]:
    async with serving_llm(None, prefix="spare") as llm:
        yield llm


@pytest.fixture
async def url(
    start_runner: StartRunner, write_spec: Callable[[str], Path], primary: LLM, spare: LLM
) -> str:
    """A runner of SPEC on `primary`, deployed with `spare` as its pool's other backend."""
    backend = settings.BackendConfig.model_validate(
        {
            "type": "openai",
            "endpoint": primary.url,
            "model": "m",
            "apiKey": "the-primarys-own-key",
            "spillover": {"spare": {"type": "openai", "endpoint": spare.url, "model": "m"}},
        }
    )
    return await start_runner(write_spec(SPEC), backend=backend)


async def test_a_spilled_call_is_served_by_the_backend_it_names_and_the_answer_says_so(
    url: str, session: aiohttp.ClientSession, primary: LLM, spare: LLM
) -> None:
    body = {"inputs": {"q": "hello"}}
    async with session.post(f"{url}/invoke", json=body, headers={SPILL_HEADER: "spare"}) as got:
        assert got.status == 200
        assert got.headers.get(SPILL_HEADER) == "spare"
        assert (await got.json())["output"] == "spare: hello"
    assert (len(primary.requests), len(spare.requests)) == (0, 1)
    assert spare.seen == [""]  # the primary's key never goes to a spill backend
    # Streamed, the header is on the answer before the first line.
    streamed = {"inputs": {"q": "streamed"}}
    async with session.post(
        f"{url}/invoke?stream=true", json=streamed, headers={SPILL_HEADER: "spare"}
    ) as got:
        assert got.headers.get(SPILL_HEADER) == "spare"
        lines = await read_lines(got)
    assert lines[-1]["output"] == "spare: streamed"
    # Not spilled: the primary, and no header. (Another question: the step cache is the
    # pool's, since its backends serve one model, and would answer the same one.)
    async with session.post(f"{url}/invoke", json={"inputs": {"q": "again"}}) as got:
        assert SPILL_HEADER not in got.headers
        assert (await got.json())["output"] == "primary: again"
    assert (len(primary.requests), len(spare.requests)) == (1, 2)


async def test_a_name_the_runner_was_not_deployed_with_is_served_by_the_primary(
    url: str, session: aiohttp.ClientSession, primary: LLM, spare: LLM
) -> None:
    body = {"inputs": {"q": "hello"}}
    async with session.post(f"{url}/invoke", json=body, headers={SPILL_HEADER: "other"}) as got:
        assert got.status == 200
        assert SPILL_HEADER not in got.headers
        assert (await got.json())["output"] == "primary: hello"
    assert (len(primary.requests), len(spare.requests)) == (1, 0)


def test_a_spill_backend_with_spill_backends_of_its_own_is_refused_naming_the_field() -> None:
    nested = {"type": "echo", "spillover": {"deeper": {"type": "echo"}}}
    with pytest.raises(pydantic.ValidationError) as raised:
        settings.BackendConfig.model_validate({"type": "echo", "spillover": {"spare": nested}})
    assert "spillover.spare.spillover" in str(raised.value)
