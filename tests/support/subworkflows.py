"""Workflows that call pinned workflows: the texts the sub-workflow tests deploy and run.

`child(n)` is a leaf (an echo model step over its input); `caller(ref, digest)` calls one
pinned workflow from a `forEach`-free step and shapes the answer, so a test can see both
the called workflow's output and the caller's own step around it.
"""

from __future__ import annotations

from plnt.workflowspec import digests

CHILD = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: shout, version: "{version}"}}
inputs:
  type: object
  properties: {{word: {{type: string}}}}
  required: [word]
  additionalProperties: false
steps:
  - id: say
    kind: model
    prompt: "shout {{{{ inputs.word }}}}"
  - id: loud
    kind: transform
    needs: [say]
    expression: "steps.say.output | upper"
output: steps.loud.output
"""

CALLER = """
apiVersion: microagents.plnt.work/v1
kind: Workflow
metadata: {{name: {name}, version: 1.0.0}}
inputs:
  type: object
  properties: {{topic: {{type: string}}}}
  required: [topic]
steps:
  - id: prepare
    kind: transform
    expression: "inputs.topic ~ '!'"
  - id: call
    kind: workflow
    needs: [prepare]
    ref: "{ref}"
    digest: "{digest}"
    inputs:
      word: steps.prepare.output
output: '{{"called": steps.call.output, "topic": inputs.topic}}'
smoke:
  inputs: {{topic: smoke}}
  expect: {{contains: "SHOUT SMOKE!"}}
"""


def child(version: str = "1.0.0") -> str:
    """The leaf workflow's text (the version changes its digest, nothing else)."""
    return CHILD.format(version=version)


def caller(ref: str, digest: str, *, name: str = "caller") -> str:
    """A workflow whose step `call` calls `ref` pinned at `digest` with `word`."""
    return CALLER.format(ref=ref, digest=digest, name=name)


def digest_of(text: str) -> str:
    return str(digests.compute(text.encode()))
