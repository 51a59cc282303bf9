"""The workflow that continues a count on the pinned model, for the model benchmark and the
tests that run the real model (`tests/support/model.py`).

A small module of its own, importing nothing, so the test session's model plugin reads it
without loading the benchmark.
"""

from __future__ import annotations

WORKFLOW = "continue"
PROMPT = "1, 2, 3, 4,"
"""A prefix the pinned base model continues with ` 5, 6, 7, …` at temperature 0."""


def spec_text(tokens: int, *, smoke: bool = False) -> str:
    """A workflow whose output *is* one completion step's output, so its tokens stream as
    the model generates them (`examples/complete.workflow.yaml` ends in a transform, which
    streams nothing until it is done). A chat's last user message (or a text completion's
    prompt) is the prefix; temperature 0 and seed 0 make the continuation reproducible.
    With `smoke`, a deploy's smoke step checks that the model continues `PROMPT`."""
    text = f"""apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: {WORKFLOW}}}
inputs: {{type: object, properties: {{prefix: {{type: string}}}}, required: [prefix]}}
chat: {{input: prefix}}
steps:
  - id: more
    kind: model
    mode: completion
    prompt: "{{{{ inputs.prefix }}}}"
    maxTokens: {tokens}
    temperature: 0
    seed: 0
output: steps.more.output
"""
    if smoke:
        text += f"""smoke:
  inputs: {{prefix: "{PROMPT}"}}
  expect: {{contains: "5"}}
"""
    return text
